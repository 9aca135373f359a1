"""tffedu.graph: builder and shape rules, schedule, lifetimes, passes, drawing.

References we did not write: graphlib (topological order), a brute-force reachability and
lifetime computation in this file, torch for the values of fused vs unfused graphs.
"""
import graphlib
import re

import matplotlib
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tffedu.errors import GraphError, ShapeError
from tffedu.blocks import qwen3_layer_graph
from tffedu.graph import Graph, Lifetime, Node, dce, fuse, post_order, register_op
from tffedu.graph_draw import layout
from tffedu.tensor import F16, F32, I32, Q8_0

matplotlib.use("Agg")


# -- builder and shape rules --------------------------------------------------------------------
def test_shape_rules_of_a_layer():
    g = Graph()
    ids = g.input("tokens", (5,), I32)
    x = g.op("get_rows", g.weight("emb", (100, 32), Q8_0), ids)
    assert x.shape == (5, 32) and x.dtype == F32
    h = g.op("rmsnorm", x, g.weight("n", (32,)), eps=1e-6, shape=(5, 32))
    q = g.op("matmul", h, g.weight("wq", (64, 32), F16))
    assert q.shape == (5, 64) and q.dtype == F32
    q = g.op("reshape", q, shape=(5, 4, 16))
    k = g.op("reshape", g.op("matmul", h, g.weight("wk", (32, 32))), shape=(5, 2, 16))
    pos = g.input("pos", (5,), I32)
    q, k = g.op("rope", q, pos, theta=1e4), g.op("rope", k, pos, theta=1e4)
    a = g.op("attention", q, k, k)
    assert a.shape == (5, 4, 16)
    s = g.op("swiglu", h, h)
    assert g.op("add", s, g.weight("b", (32,))).shape == (5, 32)
    assert g.op("mul", s, g.input("col", (5, 1))).shape == (5, 32)
    am = g.op("argmax", s)
    assert am.shape == (5,) and am.dtype == I32
    assert g.op("softmax", s).shape == (5, 32) and g.op("silu", s).shape == (5, 32)


@pytest.mark.parametrize("build, words", [
    (lambda g, x: g.op("matmul", x, g.weight("w", (8, 5))), "same K"),
    (lambda g, x: g.op("rmsnorm", x, g.weight("w", (3,))), "weight must be [D]"),
    (lambda g, x: g.op("get_rows", g.weight("w", (9, 4)), g.input("ids", (3,))), "ids must be i32"),
    (lambda g, x: g.op("rope", g.op("reshape", x, shape=(4, 2, 2)), g.input("p", (3,), I32)),
     "positions"),
    (lambda g, x: g.op("attention", g.op("reshape", x, shape=(4, 2, 2), name="q"),
                       g.op("reshape", x, shape=(4, 2, 2), name="k"),
                       g.op("reshape", x, shape=(4, 1, 4), name="v")), "must match"),
    (lambda g, x: g.op("add", x, g.input("y", (3,))), "broadcast"),
    (lambda g, x: g.op("reshape", x, shape=(3, 3)), "cannot view 16"),
    (lambda g, x: g.op("swiglu", x, g.input("y", (4, 5))), "one shape"),
    (lambda g, x: g.op("add", x, x, shape=(4, 5)), "shape=[4, 5] given"),
])
def test_shape_errors_name_the_problem(build, words):
    g = Graph()
    x = g.input("x", (4, 4))
    with pytest.raises(ShapeError, match=re.escape(words)):
        build(g, x)


def test_gqa_heads_must_divide():
    g = Graph()
    q = g.input("q", (2, 6, 8))
    k = g.input("k", (2, 4, 8))
    with pytest.raises(ShapeError, match="multiple of kv heads"):
        g.op("attention", q, k, k)


def test_graph_errors():
    g = Graph("g")
    x = g.input("x", (2,))
    with pytest.raises(GraphError, match="already has a node named 'x'"):
        g.weight("x", (2,))
    with pytest.raises(GraphError, match="belongs to another graph"):
        Graph().op("add", x, x)
    with pytest.raises(GraphError, match="not a Node"):
        g.op("add", x, np.zeros(2))
    with pytest.raises(GraphError, match="add takes 2 inputs, got 1"):
        g.op("add", x)
    with pytest.raises(GraphError, match="no shape rule"):
        g.op("frobnicate", x)
    with pytest.raises(GraphError, match="no outputs"):
        g.schedule()
    with pytest.raises(GraphError, match="no node 'y'"):
        g["y"]
    with pytest.raises(ShapeError, match="negative"):
        g.input("neg", (-1,))
    # an op without a rule is fine with an explicit shape
    assert g.op("frobnicate", x, shape=(3,), dtype=F16).dtype == F16


def test_cycle_is_reported():
    g = Graph()
    x = g.input("x", (2,))
    a = g.op("add", x, x, name="a")
    b = g.op("silu", a, name="b")
    g.output(b)
    a.inputs = (b, x)  # a buggy rewrite made a cycle
    with pytest.raises(GraphError, match="cycle"):
        g.schedule()


# -- random DAGs ------------------------------------------------------------------------------
@st.composite
def random_dags(draw, max_nodes=30):
    "A random DAG of elementwise ops on [n] vectors; some nodes dead, some outputs."
    n_leaves = draw(st.integers(1, 3))
    n_ops = draw(st.integers(1, max_nodes))
    g = Graph("random")
    nodes = [g.input(f"in{i}", (4,)) for i in range(n_leaves)]
    for i in range(n_ops):
        k = draw(st.integers(1, 2))
        ins = [nodes[draw(st.integers(0, len(nodes) - 1))] for _ in range(k)]
        nodes.append(g.op("add" if k == 2 else "silu", *ins, name=f"n{i}"))
    ops = nodes[n_leaves:]
    outs = draw(st.lists(st.sampled_from(ops), min_size=1, max_size=3, unique=True))
    g.output(*outs)
    return g


def reachable(g):
    seen, todo = set(), list(g.outputs)
    while todo:
        n = todo.pop()
        if n not in seen:
            seen.add(n)
            todo.extend(n.inputs)
    return seen


@settings(max_examples=150, deadline=None)
@given(random_dags())
def test_schedule_is_a_topological_order_of_what_outputs_need(g):
    order = post_order(g)
    assert set(order) == reachable(g)
    pos = {n: i for i, n in enumerate(order)}
    assert all(pos[i] < pos[n] for n in order for i in n.inputs)
    # graphlib agrees it is a DAG over the same nodes
    ts = graphlib.TopologicalSorter({n: n.inputs for n in order})
    assert set(ts.static_order()) == set(order)
    assert [n for n in order if n.kind == "op"] == g.schedule()


@settings(max_examples=150, deadline=None)
@given(random_dags())
def test_lifetimes_brute_force(g):
    steps = g.schedule()
    life = g.lifetimes()
    for s, n in enumerate(steps):
        readers = [t for t, m in enumerate(steps) if n in m.inputs]
        last = len(steps) - 1 if n in g.outputs else max(readers, default=s)
        assert life[n] == Lifetime(s, last)


@settings(max_examples=100, deadline=None)
@given(random_dags())
def test_dce_keeps_exactly_the_reachable_nodes(g):
    d = dce(g)
    assert sorted(n.name for n in d.nodes) == sorted(n.name for n in reachable(g))
    assert [o.name for o in d.outputs] == [o.name for o in g.outputs]
    assert [n.name for n in d.schedule()] == [n.name for n in g.schedule()]


def test_dce_keeps_side_effects():
    register_op("test_store", None, (2, 2), side_effect=True)
    g = Graph()
    x = g.input("x", (2,))
    cache = g.state("cache", (8,))
    g.op("test_store", cache, x, shape=(2,), name="store")
    g.op("silu", x, name="dead")
    g.output(g.op("silu", x, name="y"))
    assert sorted(n.name for n in dce(g).nodes) == ["cache", "store", "x", "y"]


# -- fusion ---------------------------------------------------------------------------------------
def torch_eval(graph, feed):
    "Evaluate with torch functions (F.silu, F.rms_norm): a reference we did not write."
    F = torch.nn.functional
    fns = {"add": torch.add, "mul": torch.mul, "silu": F.silu, "matmul": lambda x, w: x @ w.T,
           "swiglu": lambda g, u: F.silu(g) * u,
           "rmsnorm": lambda x, w=None, eps=1e-6: F.rms_norm(x, (x.shape[-1],), w, eps)}
    val = {}
    for n in post_order(graph):
        if n.kind != "op":
            val[n] = torch.from_numpy(feed[n.name]).double()
        else:
            attrs = {k: v for k, v in n.attrs.items() if k == "eps"}
            val[n] = fns[n.op](*(val[i] for i in n.inputs), **attrs)
    return [val[o].numpy() for o in graph.outputs]


def unfused_mlp(T, D, F_, swap):
    g = Graph("mlp")
    x = g.input("x", (T, D))
    nw = g.weight("norm", (D,))
    r = g.op("rmsnorm", x, eps=1e-5)
    h = g.op("mul", *((nw, r) if swap else (r, nw)), name="h")
    gate = g.op("matmul", h, g.weight("gate", (F_, D)))
    up = g.op("matmul", h, g.weight("up", (F_, D)))
    s = g.op("silu", gate)
    act = g.op("mul", *((up, s) if swap else (s, up)), name="act")
    g.output(g.op("add", x, g.op("matmul", act, g.weight("down", (D, F_))), name="y"))
    return g


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 6), st.integers(1, 16), st.integers(1, 24), st.booleans(), st.integers(0, 99))
def test_fused_graph_computes_the_same(T, D, F_, swap, seed):
    g = unfused_mlp(T, D, F_, swap)
    f = fuse(g)
    assert [n.op for n in f.schedule()] == ["rmsnorm", "matmul", "matmul", "swiglu", "matmul", "add"]
    assert len(f.schedule()) == len(g.schedule()) - 2
    rng = np.random.default_rng(seed)
    feed = {n.name: rng.standard_normal(n.shape) for n in g.nodes if n.kind != "op"}
    np.testing.assert_allclose(torch_eval(f, feed)[0], torch_eval(g, feed)[0], rtol=1e-12, atol=1e-12)


def test_fusion_is_skipped_when_the_intermediate_has_other_readers():
    g = Graph()
    a, b = g.input("a", (4,)), g.input("b", (4,))
    s = g.op("silu", a, name="s")
    m = g.op("mul", s, b, name="m")
    g.output(m, g.op("add", s, b, name="other"))   # s is read twice: fusing would not remove it
    assert [n.op for n in fuse(g).schedule()] == ["silu", "mul", "add"]
    g2 = Graph()
    a, b = g2.input("a", (4,)), g2.input("b", (4,))
    s = g2.op("silu", a, name="s")
    g2.output(s, g2.op("mul", s, b, name="m"))     # s is an output: must still be computed
    assert [n.op for n in fuse(g2).schedule()] == ["silu", "mul"]


def test_a_rule_may_make_new_nodes():
    "Two readers of one input replaced by views of one new node (how chapter 13 merges q, k and v)."
    g = Graph()
    x = g.input("x", (4,))
    g.output(g.op("silu", x, name="p"), g.op("silu", x, name="q"))
    both = Node("op", "pq", (8,), x.dtype, "both_silu", (x,))          # not in g: the rule makes it

    def rule(n, users):
        if n.op == "silu":
            return Node("op", n.name, n.shape, n.dtype, "view", (both,),
                        {"shape": n.shape, "offset": 4 * (n.name == "q")})
    f = fuse(g, [rule])
    assert [(n.name, n.op) for n in f.schedule()] == [("pq", "both_silu"), ("p", "view"), ("q", "view")]
    assert f["q"].inputs[0] is f["pq"] and f["q"].attrs["offset"] == 4 and [o.name for o in f.outputs] == ["p", "q"]


def test_fusion_keeps_names_and_outputs():
    f = fuse(qwen3_layer_graph(4, dim=32, n_head=2, n_head_kv=1, head_dim=16, n_ff=48, fused=False))
    assert f["blk.0.swiglu"].op == "swiglu"
    assert "blk.0.silu" not in f
    assert [o.name for o in f.outputs] == ["blk.0.ffn_res"]


# -- the Qwen3 layer and its drawing ----------------------------------------------------------------
def test_qwen3_layer_shapes():
    g = qwen3_layer_graph(64)
    assert g["blk.0.q"].shape == (64, 2048) and g["blk.0.k"].shape == (64, 1024)
    assert g["blk.0.attn"].shape == (64, 16, 128) and g["blk.0.gate"].shape == (64, 3072)
    assert g.outputs[0].shape == (64, 1024)
    assert len(g.schedule()) == 21


def test_drawing_a_layer_is_readable():
    import matplotlib.pyplot as plt
    g = qwen3_layer_graph(64)
    nodes, pos, edges = layout(g)
    # every non-view op and every input has a box; no two boxes of a row closer than one box width
    assert {n.name for n in nodes} == {n.name for n in post_order(g)
                                       if n.kind == "input" or (n.kind == "op" and not n.is_view)}
    for r in {r for _, r in pos.values()}:
        xs = sorted(x for item, (x, rr) in pos.items() if rr == r and not isinstance(item, tuple))
        assert all(b - a >= 1 - 1e-9 for a, b in zip(xs, xs[1:]))
    # every edge goes one row down at each point
    assert all(b[1] - a[1] == 1 for e in edges for a, b in zip(e, e[1:]))
    from tffedu.graph_draw import draw
    ax = draw(g)
    labels = [t.get_text() for t in ax.texts]
    assert sum("matmul" in t for t in labels) == 7 and any("attention" in t for t in labels)
    plt.close("all")
