"""Attention biases (issue 27): the broadcasting `add` in the graph, and chapter 12b's CUDA lowering
of a biased model, which must not fuse a bias add into a matmul's epilogue (it would add the bias
[N] as if it were a residual [T, N]). The numbers are checked against HF in test_qwen3_hf.py, the
op against numpy in test_op_contract.py and test_cuda_kernels.py."""
from collections import Counter

import pytest

import tffedu
from tffedu import lowering as R
from tffedu.errors import ShapeError
from tffedu.graph import Graph
from tffedu.models import create
from tffedu.tensor import F16, Q8_0
from hf_models import tiny_llama, tiny_qwen2, tiny_qwen3, write_gguf


def test_add_takes_a_residual_or_a_bias_and_nothing_else():
    g = Graph()
    x = g.input("x", (4, 6))
    assert g.op("add", x, g.input("r", (4, 6))).shape == (4, 6)                 # a residual
    assert g.op("add", x, g.weight("b", (6,))).shape == (4, 6)                  # a bias over the rows
    assert g.op("add", g.input("y", (2, 4, 6)), g.weight("b3", (6,))).shape == (2, 4, 6)
    for shape in ((4,), (1, 6), (4, 1), (6, 6), ()):   # all of these broadcast in numpy
        with pytest.raises(ShapeError, match="broadcast over the rows"):
            g.op("add", x, g.input(f"z{len(g.nodes)}", shape))


def test_bias_add_is_never_a_matmul_epilogue():
    "add(matmul(h, W), b [N]) where the matmul's kernel has an epilogue (a Q8_0 GEMV): not fused."
    g = Graph()
    m = g.op("matmul", g.input("h", (1, 64)), g.weight("w", (64, 64), Q8_0), name="m")
    g.output(g.op("add", m, g.weight("w.bias", (64,)), name="mb"))
    low = R.lower(g, "cuda")
    assert [n.op for n in low.schedule()] == ["matmul", "add"]
    g = Graph()                                            # the same with a residual: fused
    m = g.op("matmul", g.input("h", (1, 64)), g.weight("w", (64, 64), Q8_0), name="m")
    g.output(g.op("add", g.input("r", (1, 64)), m, name="mr"))
    assert [n.op for n in R.lower(g, "cuda").schedule()] == ["matmul_add"]


@pytest.fixture(scope="module")
def biased(tmp_path_factory):
    d = tmp_path_factory.mktemp("bias")
    return {"qwen3": write_gguf(tiny_qwen3(hidden=64, heads=4, kv_heads=2, ffn=128, seed=3, attention_bias=True),
                                d / "q.gguf", "Q8_0"),
            "llama": write_gguf(tiny_llama(hidden=64, heads=4, kv_heads=2, seed=4, attention_bias=True),
                                d / "l.gguf", "Q8_0"),
            "qwen2": write_gguf(tiny_qwen2(hidden=64, heads=4, kv_heads=2, seed=5), d / "q2.gguf", "Q8_0")}


@pytest.mark.parametrize("arch", ["qwen3", "llama", "qwen2"])
@pytest.mark.parametrize("kind,N,B", [("decode", 1, 1), ("decode", 4, 4), ("prefill", 16, 1)])
def test_lowered_biased_model(biased, arch, kind, N, B):
    """A biased Q8_0 model's paged graph, lowered for CUDA (on any machine: a graph rewrite): each
    bias (4 per block; Qwen2's 3: q, k, v) is still an `add` of [rows] to its projection's output;
    no fused op reads a bias; a residual reaches a GEMV epilogue only where no bias comes between:
    the FFN's, and Qwen2's o-projection (it has no bias)."""
    m = tffedu.load(biased[arch])
    cfg = m.config
    n_bias = 3 if arch == "qwen2" else 4
    assert cfg.attn_bias == ("attn_q", "attn_k", "attn_v", "attn_output")[:n_bias]
    creator = create(cfg, m.n_ctx, {n: w.dtype for n, w in m.weights.items()})
    g = R.lower(R.PagedGraphs(creator, (8, 16, cfg.n_head_kv, cfg.head_dim), F16).build(kind, N, B, 2), "cuda")
    L = cfg.n_layer
    bias_adds = [n for n in g.nodes if n.op == "add" and n.inputs[1].name.endswith(".bias")]
    assert len(bias_adds) == n_bias * L
    for n in bias_adds:
        b = n.inputs[1]
        assert b.kind == "weight" and b.shape == (n.shape[-1],) and n.inputs[0].shape == n.shape
    readers = Counter(u.op for u in g.nodes if u.kind == "op" for i in u.inputs if i.name.endswith(".bias"))
    assert readers == {"add": n_bias * L}
    ops = Counter(n.op for n in g.nodes if n.kind == "op")
    assert ops["matmul_add"] == ((5 - n_bias) * L if kind == "decode" else 0)
    assert "qk_norm_rope_pair" not in ops and "qk_norm_rope_store" not in ops   # q, k pass a bias add first
