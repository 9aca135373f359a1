"""Chapter 05a exercises: layer rows (reference: every path enumerated) and edge crossings
(reference: a segment-intersection test in the plane)."""
import itertools
import random


def random_dag(n, p, seed):
    rng = random.Random(seed)
    names = [f"n{i}" for i in range(n)]
    return names, [(names[i], names[j]) for i in range(n) for j in range(i + 1, n) if rng.random() < p]


def test_ch05a_1_layer_rows(impl):
    for seed in range(15):
        nodes, edges = random_dag(10, 0.3, seed)

        def longest(v):                         # the longest path ending at v, by enumeration
            ins = [u for u, w in edges if w == v]
            return 0 if not ins else 1 + max(longest(u) for u in ins)
        assert impl.layer_rows(nodes, edges) == {n: longest(n) for n in nodes}, seed


def segments_cross(p1, p2, q1, q2):
    "Do segments p1-p2 and q1-q2 cross at a point inside both (orientation test)?"
    def orient(a, b, c):
        return (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0])
    return orient(p1, p2, q1) * orient(p1, p2, q2) < 0 and orient(q1, q2, p1) * orient(q1, q2, p2) < 0


def test_ch05a_2_count_crossings(impl):
    rng = random.Random(0)
    for _ in range(40):
        top, bottom = [f"t{i}" for i in range(6)], [f"b{i}" for i in range(6)]
        xt = dict(zip(top, rng.sample(range(20), 6)))
        xb = dict(zip(bottom, rng.sample(range(20), 6)))
        edges = rng.sample(list(itertools.product(top, bottom)), rng.randint(0, 12))
        ref = sum(segments_cross((xt[a], 1), (xb[b], 0), (xt[c], 1), (xb[d], 0))
                  for (a, b), (c, d) in itertools.combinations(edges, 2))
        assert impl.count_crossings(edges, xt, xb) == ref


WRONG = {"test_ch05a_1_layer_rows": {"shortest-path": {"layer_rows": lambda nodes, edges: {
             n: 0 if not [u for u, v in edges if v == n] else 1 for n in nodes}}},
         "test_ch05a_2_count_crossings": {"shared-ends-cross": {"count_crossings": lambda edges, xt, xb: sum(
             (xt[a] - xt[c]) * (xb[b] - xb[d]) <= 0 for i, (a, b) in enumerate(edges) for c, d in edges[i + 1:])}}}
