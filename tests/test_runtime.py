"""tffedu.runtime: the executor runs a planned graph in one arena and gives what a run without an
arena gives (random DAGs, poisoned arena), binds and checks values, reports missing pieces, times.

The test ops live in a private OpRegistry (plain numpy), so these tests do not depend on
tffedu.ops.cpu; one test runs a Qwen3 layer with the real CPU ops when they are importable.
"""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tffedu.errors import DeviceError, GraphError, ShapeError
from tffedu.factory import OpRegistry
from tffedu.blocks import qwen3_layer_graph
from tffedu.graph import Graph, post_order
from tffedu.runtime import Executor, cpu_arena
from tffedu.tensor import F32, I32

NP_FNS = {
    "add": lambda a, b: a + b,
    "mul": lambda a, b: a * b,
    "silu": lambda x: x / (1 + np.exp(-x)),
    "tanh": np.tanh,
    "matmul": lambda x, w: x @ w.T,
    "rmsnorm": lambda x, w=None, eps=1e-6: x / np.sqrt((x * x).mean(-1, keepdims=True) + eps)
    * (1 if w is None else w),
}


def np_registry():
    "Ops with the engine's calling convention fn(*inputs, out=None, **attrs) -> out."
    reg = OpRegistry()
    for name, f in NP_FNS.items():
        def op(*args, out=None, _f=f, **attrs):
            res = _f(*args, **attrs)
            if out is None:
                return res
            out[...] = res
            return out
        reg.register(name, "cpu", op)
    return reg


def eval_without_arena(graph, feed):
    "Each op allocates its result: nothing can alias."
    val = {}
    for n in post_order(graph):
        if n.kind != "op":
            val[n] = feed[n.name]
        elif n.is_view:
            val[n] = val[n.inputs[0]].reshape(n.shape)
        else:
            val[n] = NP_FNS[n.op](*(val[i] for i in n.inputs), **n.attrs)
    return {o.name: val[o] for o in graph.outputs}


@st.composite
def random_programs(draw):
    "Random DAGs of elementwise ops and views over [4, 8] float32 tensors, with dead nodes."
    g = Graph("random")
    nodes = [g.input(f"in{i}", (4, 8)) for i in range(draw(st.integers(1, 3)))]
    nodes.append(g.weight("w", (4, 8)))
    for i in range(draw(st.integers(1, 30))):
        op = draw(st.sampled_from(["add", "mul", "silu", "tanh", "view"]))
        a = nodes[draw(st.integers(0, len(nodes) - 1))]
        if op == "view":
            nodes.append(g.op("reshape", a, shape=(8, 4) if a.shape == (4, 8) else (4, 8), name=f"n{i}"))
            continue
        ins = [a] if op in ("silu", "tanh") else [a, nodes[draw(st.integers(0, len(nodes) - 1))]]
        if len(ins) == 2 and ins[0].shape != ins[1].shape:
            ins[1] = g.op("reshape", ins[1], shape=ins[0].shape, name=f"r{i}")
        nodes.append(g.op(op, *ins, name=f"n{i}", shape=ins[0].shape))
    ops = [n for n in nodes if n.kind == "op"]
    g.output(*draw(st.lists(st.sampled_from(ops), min_size=1, max_size=3, unique=True)))
    return g


@settings(max_examples=80, deadline=None)
@given(random_programs(), st.sampled_from(["greedy_by_size", "first_fit_by_start"]),
       st.integers(0, 2**31))
def test_arena_run_equals_run_without_arena(g, strategy, seed):
    rng = np.random.default_rng(seed)
    feed = {n.name: rng.standard_normal(n.shape).astype(np.float32)
            for n in post_order(g) if n.kind != "op"}
    ex = Executor(g, "cpu", ops=np_registry(), strategy=strategy)
    ex.bind({"w": feed.get("w", np.zeros((4, 8), np.float32))})
    ex.arena[:] = 0xFF      # garbage (NaN): a read of unwritten memory would show
    got = ex.run({k: v for k, v in feed.items() if k != "w"})
    want = eval_without_arena(g, feed)
    assert got.keys() == want.keys()
    for k in want:
        np.testing.assert_array_equal(got[k], want[k])
    # a second run with other inputs reuses the same arena
    feed2 = {k: v + 1 for k, v in feed.items()}
    ex.bind({"w": feed2.get("w", np.zeros((4, 8), np.float32))})
    got2 = ex.run({k: v for k, v in feed2.items() if k != "w"})
    for k, v in eval_without_arena(g, feed2).items():
        np.testing.assert_array_equal(got2[k], v)


def small_mlp():
    g = Graph("mlp")
    x = g.input("x", (3, 8))
    h = g.op("rmsnorm", x, g.weight("n", (8,)), eps=1e-5)
    up = g.op("matmul", h, g.weight("up", (16, 8)))
    act = g.op("silu", up)
    g.output(g.op("add", x, g.op("matmul", act, g.weight("down", (8, 16))), name="y"))
    return g


def test_small_mlp_against_numpy():
    rng = np.random.default_rng(1)
    w = {"n": rng.random(8, dtype=np.float32), "up": rng.standard_normal((16, 8), dtype=np.float32),
         "down": rng.standard_normal((8, 16), dtype=np.float32)}
    x = rng.standard_normal((3, 8), dtype=np.float32)
    ex = Executor(small_mlp(), ops=np_registry()).bind(w)
    y = ex.run(x=x)["y"]
    h = x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-5) * w["n"]
    u = h @ w["up"].T
    np.testing.assert_allclose(y, x + (u / (1 + np.exp(-u))) @ w["down"].T, rtol=1e-5, atol=1e-5)
    assert ex.arena.ctypes.data % 64 == 0 and ex.arena.nbytes == ex.plan.arena_size
    # outputs are copies by default, arena views with copy=False
    assert not np.shares_memory(y, ex.arena)
    assert np.shares_memory(ex.run(x=x, copy=False)["y"], ex.arena)


def test_views_at_offsets_are_parts_of_one_output():
    "One op's output read as two tensors laid end to end (chapter 13's q, k and v of a matmul_cat)."
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 8), dtype=np.float32)
    g = Graph()
    both = g.op("tanh", g.input("x", (24,)), shape=(24,), name="both")   # a [3, 5] part, then [3, 3]
    a = g.op("view", both, shape=(3, 5), name="a")
    b = g.op("view", both, shape=(3, 3), offset=15, name="b")
    g.output(g.op("silu", a, name="sa"), g.op("add", b, b, name="bb"))
    for strategy in ("greedy_by_size", "no_reuse"):
        out = Executor(g, ops=np_registry(), strategy=strategy).run(x=x.ravel())
        t = np.tanh(x.ravel())
        np.testing.assert_allclose(out["sa"], NP_FNS["silu"](t[:15].reshape(3, 5)), rtol=1e-6)
        np.testing.assert_allclose(out["bb"], 2 * t[15:].reshape(3, 3), rtol=1e-6)
    with pytest.raises(ShapeError, match="not all in 24"):
        g.op("view", both, shape=(3, 3), offset=16)
    with pytest.raises(ShapeError, match="not all in"):
        g.op("view", both, shape=(2,), offset=-1)
    for bad in (1.5, "3", True):
        with pytest.raises(ShapeError, match="offset must be an integer"):
            g.op("view", both, shape=(2,), offset=bad)


def test_int_inputs_are_converted_and_shapes_checked():
    reg = np_registry()
    reg.register("take", "cpu", lambda t, i, out=None: np.take(t, i, axis=0, out=out))
    g = Graph()
    ids = g.input("ids", (3,), I32)
    g.output(g.op("take", g.weight("t", (5, 2)), ids, shape=(3, 2), dtype=F32, name="y"))
    t = np.arange(10, dtype=np.float32).reshape(5, 2)
    ex = Executor(g, ops=reg).bind({"t": t})
    np.testing.assert_array_equal(ex.run(ids=[4, 0, 2])["y"], t[[4, 0, 2]])
    with pytest.raises(ShapeError, match=r"input 'ids' must have shape \[3\], got \[2\]"):
        ex.run(ids=[1, 2])


def test_clear_errors():
    g = small_mlp()
    reg = np_registry()
    ex = Executor(g, ops=reg)
    x = np.zeros((3, 8), np.float32)
    with pytest.raises(GraphError, match=r"needs values for \['n', 'up', 'down'\]"):
        ex.run(x=x)
    with pytest.raises(ShapeError, match=r"'up' must have shape \[16, 8\], got \[8, 16\]"):
        ex.bind({"up": np.zeros((8, 16), np.float32)})
    with pytest.raises(GraphError, match=r"unknown input\(s\) \['xx'\].*takes \['x'\]"):
        ex.run(xx=x)
    ex.bind({"unused.weight": 1.0})   # names the graph does not use are ignored
    bad = OpRegistry()
    with pytest.raises(GraphError, match="node 'rmsnorm.1' needs op 'rmsnorm' on 'cpu'"):
        Executor(g, ops=bad)
    with pytest.raises(DeviceError, match="no runtime for backend 'tpu'"):
        Executor(g, "tpu", ops=reg)
    reg2 = np_registry()
    reg2.register("silu", "cpu", lambda x, out=None, alpha=1.0: out, replace=True)
    g2 = Graph()
    g2.output(g2.op("silu", g2.input("x", (2,)), beta=2.0))
    with pytest.raises(GraphError, match="beta"):
        Executor(g2, ops=reg2).run(x=np.zeros(2, np.float32))


def test_an_op_that_ignores_out_still_fills_the_arena():
    reg = OpRegistry()
    reg.register("double", "cpu", lambda x, out=None: 2 * x)    # returns a new array
    g = Graph()
    g.output(g.op("double", g.op("double", g.input("x", (4,)), shape=(4,)), shape=(4,), name="y"))
    np.testing.assert_array_equal(Executor(g, ops=reg).run(x=np.ones(4))["y"], 4 * np.ones(4))


def test_states_are_written_in_place():
    reg = OpRegistry()

    def store(cache, x, out=None, row=0):
        cache[row] = x
        out[...] = x
        return out
    reg.register("store", "cpu", store)
    g = Graph()
    cache = g.state("cache", (4, 2))
    g.output(g.op("store", cache, g.input("x", (2,)), shape=(2,), name="y", row=2))
    kv = np.zeros((4, 2), np.float32)
    Executor(g, ops=reg).bind({"cache": kv}).run(x=np.array([5, 6], np.float32))
    np.testing.assert_array_equal(kv[2], [5, 6])


def test_per_op_times():
    g = small_mlp()
    rng = np.random.default_rng(0)
    ex = Executor(g, ops=np_registry()).bind(
        {n.name: rng.random(n.shape, dtype=np.float32) for n in g.nodes if n.kind == "weight"})
    for _ in range(3):
        ex.run(x=np.ones((3, 8), np.float32))
    prof = ex.profile()
    assert ex.n_runs == 3 and [p.name for p in prof] == [n.name for n in ex.steps]
    assert all(p.seconds > 0 for p in prof)
    by_op = ex.time_by_op()
    assert set(by_op) == {"rmsnorm", "matmul", "silu", "add"}
    assert sum(by_op.values()) == pytest.approx(sum(p.seconds for p in prof))
    ex.reset_times()
    assert ex.n_runs == 0 and not ex.times.any()


def test_cpu_arena_alignment():
    for n in (0, 1, 100, 4096):
        for a in (64, 256):
            buf = cpu_arena(n, a)
            assert buf.nbytes == n and (n == 0 or buf.ctypes.data % a == 0)  # empty: no address


def _layer_case(T, D, head_dim, n_ff):
    "Two Qwen3 layers (4 q heads, 2 kv heads) with random weights and inputs: (graph, weights, feed)."
    g = qwen3_layer_graph(T, dim=D, n_head=4, n_head_kv=2, head_dim=head_dim, n_ff=n_ff, n_layer=2)
    rng = np.random.default_rng(0)
    w = {n.name: (rng.standard_normal(n.shape) / np.sqrt(n.shape[-1])).astype(np.float32)
         for n in g.nodes if n.kind == "weight"}
    feed = {"x": rng.standard_normal((T, D)).astype(np.float32), "pos": np.arange(T, dtype=np.int32)}
    return g, w, feed


def test_qwen3_layer_with_the_real_cpu_ops():
    pytest.importorskip("tffedu.ops.cpu")
    from tffedu.factory import OPS
    g, w, feed = _layer_case(T=8, D=64, head_dim=16, n_ff=96)
    ex = Executor(g, "cpu").bind(w)
    ex.arena[:] = 0xFF
    got = ex.run(feed)["blk.1.ffn_res"]
    # the same ops, each allocating its own output (no arena)
    val = {}
    for n in post_order(g):
        if n.kind != "op":
            val[n] = {**w, **feed}[n.name]
        elif n.is_view:
            val[n] = val[n.inputs[0]].reshape(n.shape)
        else:
            val[n] = OPS.get(n.op, "cpu")(*(val[i] for i in n.inputs), **n.attrs)
    np.testing.assert_array_equal(got, val[g.outputs[0]])
    assert np.isfinite(got).all()


@pytest.mark.gpu
def test_cuda_arena_views():
    from tffedu.runtime import cuda_arena, cuda_view
    g = Graph()
    x = g.op("silu", g.input("x", (4, 8)), name="y")
    arena = cuda_arena(4096)
    v = cuda_view(arena, 256, x)
    assert v.shape == (4, 8) and v.device == "cuda" and v.data_ptr() == arena.data_ptr() + 256


@pytest.mark.gpu
def test_qwen3_layer_on_cuda_matches_the_cpu():
    from tffedu.tensor import Tensor
    g, w, feed = _layer_case(T=16, D=128, head_dim=32, n_ff=256)
    want = Executor(g, "cpu").bind(w).run(feed)["blk.1.ffn_res"]
    ex = Executor(g, "cuda")
    assert ex.plan.alignment == 256 and ex.arena.device == "cuda"
    assert all(ex._views[n].data_ptr() % 256 == 0 for n in ex._views)
    ex.bind({k: Tensor.from_numpy(v).to("cuda") for k, v in w.items()})
    got = ex.run(feed)["blk.1.ffn_res"]
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3 * np.abs(want).max())


def test_op_totals_sum_the_timeline_by_op():
    "The profile scripts' table: launches, µs and a column's sum per op, from `op_timeline`'s rows. CPU."
    from tffedu.runner import op_totals
    rows = [dict(op="matmul", us=2.0, bytes=10), dict(op="add", us=0.5, bytes=1), dict(op="matmul", us=3.0, bytes=30)]
    assert op_totals(rows, "bytes") == {"matmul": [2, 5.0, 40], "add": [1, 0.5, 1]}
    assert op_totals([], "bytes") == {}


def test_op_bytes_of_a_mixture_counts_the_experts_touched():
    """op_bytes of a moe_ffn: the router whole, each expert tensor times the share of experts T tokens
    picking k of E touch on average, 1 - (1 - k/E)^T; a dense matmul its whole weight. The lowered
    moe_ffn_add (chapter 12b, what a GPU decode step runs) the same, and its residual read. CPU."""
    from dataclasses import replace
    from types import SimpleNamespace
    from tffedu.runner import op_bytes
    T, D, E, F, k = 3, 16, 8, 4, 2
    g = Graph()
    x = g.input("x", (T, D))
    ws = [g.weight(n, s) for n, s in (("r", (E, D)), ("g", (E, F, D)), ("u", (E, F, D)), ("d", (E, D, F)))]
    y = g.op("moe_ffn", x, *ws, k=k, norm=True)
    z = g.op("matmul", x, ws[0])
    weights = {w.name: SimpleNamespace(nbytes=4 * int(np.prod(w.shape))) for w in ws}
    share = 1 - (1 - k / E) ** T                                   # 0.578125
    experts = sum(int(4 * E * F * D * share) for _ in range(3))
    assert op_bytes(y, weights) == 4 * T * D * 2 + 4 * E * D + experts
    fused = replace(y, op="moe_ffn_add", inputs=(*y.inputs, g.input("res", (T, D))))
    assert op_bytes(fused, weights) == 4 * T * D * 3 + 4 * E * D + experts
    assert op_bytes(z, weights) == 4 * T * D + 4 * E * D + 4 * T * E
