"""Chapter 05 exercises: topological order, lifetimes, dead code. References: the standard
library's graphlib, and brute force over all paths."""
import graphlib
import random

import pytest


def random_dag(n, p, seed):
    rng = random.Random(seed)
    names = [f"n{i}" for i in range(n)]
    perm = names[:]
    rng.shuffle(perm)                       # edges go forward in a hidden order
    edges = [(perm[i], perm[j]) for i in range(n) for j in range(i + 1, n) if rng.random() < p]
    return names, edges


def reference_order(nodes, edges):
    "graphlib does the bookkeeping; we take the earliest ready node (in `nodes`) each step."
    ts = graphlib.TopologicalSorter({n: set() for n in nodes})
    for u, v in edges:
        ts.add(v, u)
    ts.prepare()
    rank, ready, out = {n: i for i, n in enumerate(nodes)}, set(), []
    while ts.is_active():
        ready |= set(ts.get_ready())
        n = min(ready, key=rank.get)
        ready.remove(n)
        out.append(n)
        ts.done(n)
    return out


def test_ch05_1_topo_order(impl):
    for seed in range(20):
        nodes, edges = random_dag(12, 0.25, seed)
        assert impl.topo_order(nodes, edges) == reference_order(nodes, edges), seed
    with pytest.raises(ValueError):
        impl.topo_order(["a", "b", "c"], [("a", "b"), ("b", "c"), ("c", "a")])


def test_ch05_2_lifetimes(impl):
    for seed in range(20):
        nodes, edges = random_dag(10, 0.3, seed)
        order = reference_order(nodes, edges)
        outs = [order[len(order) // 2], order[-1]]
        got = impl.lifetimes(order, edges, outs)
        for i, n in enumerate(order):
            readers = [order.index(v) for u, v in edges if u == n]
            last = len(order) - 1 if n in outs else max(readers, default=i)
            assert got[n] == (i, last), (seed, n)


def test_ch05_3_dead_nodes(impl):
    for seed in range(20):
        nodes, edges = random_dag(10, 0.2, seed)
        outs = nodes[:2]

        def reaches(a, b):                  # is there a path a -> ... -> b? (brute force)
            return a == b or any(reaches(v, b) for u, v in edges if u == a)

        dead = {n for n in nodes if not any(reaches(n, o) for o in outs)}
        assert impl.dead_nodes(nodes, edges, outs) == dead, seed


def _wrong_order(nodes, edges):            # a DFS post-order reversed: valid, but not Kahn's tie-break
    seen, out = set(), []

    def visit(n):
        if n not in seen:
            seen.add(n)
            for u, v in edges:
                if u == n:
                    visit(v)
            out.append(n)
    for n in nodes:
        visit(n)
    return out[::-1]


def _wrong_lifetimes(order, edges, outputs=()):   # forgets that outputs live to the end
    from solutions.ch05 import lifetimes
    return lifetimes(order, edges, ())


WRONG = {"test_ch05_1_topo_order": {"dfs-order": {"topo_order": _wrong_order}},
         "test_ch05_2_lifetimes": {"outputs-die": {"lifetimes": _wrong_lifetimes}},
         "test_ch05_3_dead_nodes": {"only-direct-inputs": {"dead_nodes": lambda nodes, edges, outs:
                                    set(nodes) - set(outs) - {u for u, v in edges if v in outs}}}}
