"""tffedu.planner: no two live tensors overlap (property tests on random DAGs and random buffers),
the arena against the lower bound on Qwen3-shaped layers, views, errors.

The overlap check and the lower bound are recomputed here by brute force, not with plan.check().
"""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tffedu.errors import PlannerError
from tffedu.blocks import qwen3_layer_graph
from tffedu.graph import Graph
from tffedu.planner import (STRATEGIES, Buffer, MemoryPlan, align_up, buffers, live_bytes,
                            plan_buffers, plan_memory)
from tffedu.tensor import F16, F32, I32

REAL = ["greedy_by_size", "first_fit_by_start", "online_best_fit"]


def assert_no_live_overlap(plan: MemoryPlan):
    "Brute force over all pairs: alive at a common step => disjoint byte ranges."
    bs = plan.buffers
    for i, a in enumerate(bs):
        oa = plan.offsets[a.name]
        assert oa % plan.alignment == 0 and 0 <= oa and oa + a.size <= plan.arena_size
        for b in bs[i + 1:]:
            if a.size and b.size and a.first <= b.last and b.first <= a.last:  # empty: no bytes
                ob = plan.offsets[b.name]
                assert oa + a.size <= ob or ob + b.size <= oa, (a, oa, b, ob)


def brute_lower_bound(bs):
    steps = range(1 + max((b.last for b in bs), default=-1))
    return max((sum(b.size for b in bs if b.first <= s <= b.last) for s in steps), default=0)


@st.composite
def random_graphs(draw, max_ops=40):
    "Random DAGs with mixed sizes and dtypes, views (reshape) of ops and of inputs, dead nodes."
    g = Graph("random")
    nodes = [g.input(f"in{i}", (draw(st.integers(1, 64)),)) for i in range(draw(st.integers(1, 3)))]
    for i in range(draw(st.integers(1, max_ops))):
        kind = draw(st.sampled_from(["op1", "op2", "view"]))
        src = nodes[draw(st.integers(0, len(nodes) - 1))]
        if kind == "view":
            nodes.append(g.op("reshape", src, shape=(1,) + src.shape, name=f"v{i}"))
        else:
            ins = [src] if kind == "op1" else [src, nodes[draw(st.integers(0, len(nodes) - 1))]]
            size = draw(st.integers(0, 5000))
            dtype = draw(st.sampled_from([F32, F16, I32]))
            nodes.append(g.op("t", *ins, shape=(size,), dtype=dtype, name=f"n{i}"))
    ops = [n for n in nodes if n.kind == "op"]
    g.output(*draw(st.lists(st.sampled_from(ops), min_size=1, max_size=3, unique=True)))
    return g


@settings(max_examples=100, deadline=None)
@given(random_graphs(), st.sampled_from(REAL), st.sampled_from([64, 256]))
def test_random_dags_live_tensors_never_overlap(g, strategy, alignment):
    plan = plan_memory(g, strategy, alignment)
    assert_no_live_overlap(plan)
    lb = brute_lower_bound(plan.buffers)
    assert plan.lower_bound == lb
    assert lb <= plan.arena_size <= plan.no_reuse
    # every op node of the schedule has an offset; a view has its base's
    for n in g.schedule():
        if n.is_view:
            base = n.inputs[0]
            while base.is_view:
                base = base.inputs[0]
            assert plan.offset(n.name) == (plan.offset(base.name) if base.kind == "op" else None)
        elif n.nbytes:
            assert plan.offset(n.name) is not None


@st.composite
def random_buffers(draw):
    n = draw(st.integers(0, 60))
    out = []
    for i in range(n):
        first = draw(st.integers(0, 30))
        last = first + draw(st.integers(0, 10))
        out.append(Buffer(f"b{i}", 64 * draw(st.integers(0, 100)), first, last))
    return out


@settings(max_examples=100, deadline=None)
@given(random_buffers(), st.sampled_from(list(STRATEGIES)))
def test_random_buffers_never_overlap(bs, strategy):
    plan = plan_buffers(bs, strategy)
    assert_no_live_overlap(plan)
    assert brute_lower_bound(bs) <= plan.arena_size <= sum(b.size for b in bs)
    assert np.array_equal(live_bytes(bs), [sum(b.size for b in bs if b.first <= s <= b.last)
                                           for s in range(len(live_bytes(bs)))])


def test_a_chain_reuses_two_slots():
    # a -> b -> c -> d, each 1 KiB: at most two alive at once, so two slots suffice
    bs = [Buffer(n, 1024, i, i + 1) for i, n in enumerate("abcd")]
    for s in REAL:
        plan = plan_buffers(bs, s)
        assert plan.arena_size == 2048 == plan.lower_bound
        assert plan.offsets["a"] == plan.offsets["c"] and plan.offsets["b"] == plan.offsets["d"]


def test_best_fit_takes_the_tightest_gap_first_fit_the_lowest():
    # worked by hand: A..F stack up to 640 B; at step 5, B and E are dead and leave two holes,
    # [192, 320) of 128 B and [512, 576) of 64 B. Z (64 B, step 5) goes into the tight one with
    # best fit, into the lowest one with first fit.
    bs = [Buffer("A", 192, 0, 9), Buffer("B", 128, 0, 4), Buffer("C", 128, 0, 9),
          Buffer("D", 64, 0, 9), Buffer("E", 64, 0, 4), Buffer("F", 64, 0, 9), Buffer("Z", 64, 5, 5)]
    best, first = plan_buffers(bs, "greedy_by_size"), plan_buffers(bs, "first_fit_by_start")
    assert [best.offsets[n] for n in "ABCDEF"] == [0, 192, 320, 448, 512, 576]
    assert best.offsets["Z"] == 512 and first.offsets["Z"] == 192
    assert best.arena_size == first.arena_size == 640
    # online best fit frees B and E when Z arrives and takes the tight hole too
    assert plan_buffers(bs, "online_best_fit").offsets["Z"] == 512


def test_online_best_fit_merges_freed_neighbours():
    # a and b die, then c needs both their bytes: without merging the free blocks it would grow
    bs = [Buffer("a", 64, 0, 0), Buffer("b", 64, 0, 0), Buffer("keep", 64, 0, 2),
          Buffer("c", 128, 1, 2)]
    plan = plan_buffers(bs, "online_best_fit")
    assert plan.offsets["c"] in (0, 64) and plan.arena_size == 192


@pytest.mark.parametrize("T", [64, 1])
@pytest.mark.parametrize("n_layer", [1, 2])
def test_qwen3_layer_arena_is_within_10_percent_of_the_lower_bound(T, n_layer, capsys):
    g = qwen3_layer_graph(T, dim=1024, n_head=16, n_head_kv=8, head_dim=128, n_ff=3072,
                          n_layer=n_layer)
    plan = plan_memory(g, "greedy_by_size", 64)
    assert_no_live_overlap(plan)
    lb = brute_lower_bound(plan.buffers)
    ratio = plan.arena_size / lb
    with capsys.disabled():
        print(f"\nQwen3-0.6B-shaped {n_layer}-layer graph T={T}: arena {plan.arena_size} B, "
              f"lower bound {lb} B, ratio {ratio:.3f}, no reuse {plan.no_reuse} B")
    assert ratio <= 1.10
    # the biggest activation of a layer: the [T, 3072] float32 FFN tensors, three alive at once
    assert lb >= 3 * T * 3072 * 4


def test_views_extend_the_life_of_their_base():
    g = Graph()
    x = g.input("x", (16,))
    a = g.op("silu", x, name="a")
    v = g.op("reshape", a, shape=(1, 16), name="v")
    b = g.op("silu", x, name="b")
    c = g.op("silu", b, name="c")
    g.output(g.op("add", v, c, name="d"))   # reads the view at the last step
    bufs, home = buffers(g)
    life = {b.name: (b.first, b.last) for b in bufs}
    assert life["a"] == (0, 4) and "v" not in life and home["v"] == "a"
    plan = plan_memory(g)
    assert plan.offset("v") == plan.offset("a")
    assert_no_live_overlap(plan)


def test_view_of_an_input_is_outside_the_arena():
    g = Graph()
    x = g.input("x", (16,))
    g.output(g.op("silu", g.op("reshape", x, shape=(4, 4), name="v"), name="y"))
    plan = plan_memory(g, alignment=256)
    assert plan.offset("v") is None and plan.offset("y") == 0 and plan.arena_size == 256


def test_outputs_live_to_the_end():
    g = Graph()
    x = g.input("x", (16,))
    early = g.op("silu", x, name="early")
    late = g.op("silu", g.op("silu", x), name="late")
    g.output(early, late)
    bufs, _ = buffers(g)
    assert {b.name: b.last for b in bufs}["early"] == 2


def test_sizes_are_aligned():
    assert align_up(1, 64) == 64 and align_up(64, 64) == 64 and align_up(65, 256) == 256
    g = Graph()
    g.output(g.op("silu", g.input("x", (3,)), name="y"))   # 12 bytes
    assert plan_memory(g, alignment=256).buffers[0].size == 256


def test_check_catches_an_overlap():
    bs = [Buffer("a", 64, 0, 2), Buffer("b", 64, 1, 3)]
    bad = MemoryPlan("by hand", 64, bs, {"a": 0, "b": 0})
    with pytest.raises(PlannerError, match="step 1: 'a' .* overlaps 'b'"):
        bad.check()
    with pytest.raises(PlannerError, match="not a multiple of 64"):
        MemoryPlan("by hand", 64, bs, {"a": 0, "b": 32}).check()


def test_errors():
    g = Graph()
    g.output(g.op("silu", g.input("x", (3,))))
    with pytest.raises(PlannerError, match="unknown strategy 'best'"):
        plan_memory(g, "best")
    with pytest.raises(PlannerError, match="power of two"):
        plan_memory(g, alignment=48)
    with pytest.raises(PlannerError, match="bad buffer"):
        plan_buffers([Buffer("a", 10, 0, 1)])
    with pytest.raises(PlannerError, match="unique"):
        plan_buffers([Buffer("a", 64, 0, 1), Buffer("a", 64, 2, 3)])


def test_summary_and_drawing():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from tffedu.planner import draw_plan
    plan = plan_memory(qwen3_layer_graph(64))
    assert "x1.000" in plan.summary() and "greedy_by_size" in plan.summary()
    ax = draw_plan(plan)
    from matplotlib.patches import Rectangle
    assert sum(isinstance(p, Rectangle) for p in ax.patches) == len(plan.buffers)
    plt.close("all")
