"""Chapter 12b's lowering pass (issue 12): which fusions fire where, and that they change nothing.

* on any machine: the CUDA lowering of a Q8_0 decode graph turns each FFN's gate/up/swiglu into one
  `matmul_swiglu`, both residual adds into `matmul_add`, both norms into `rmsnorm_q8`, and q, k
  and v into one `matmul_cat` of one quantization, read through views; prefill graphs (T > 8 rows) and other weight
  types keep the plain ops; the CPU lowering is the identity;
* on the GPU: greedy and sampled tokens of fused decode steps equal the unfused ones exactly.
"""
from collections import Counter

import numpy as np
import pytest

import tffedu
from tffedu import lowering as R
from tffedu.models import create
from tffedu.sampling import SamplingParams
from tffedu.tensor import F16
from hf_models import tiny_gemma3, tiny_llama, tiny_mistral, tiny_qwen2, tiny_qwen3, tiny_qwen3moe, write_gguf


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("lower")
    return {
        "qwen3 Q8_0": write_gguf(tiny_qwen3(hidden=64, layers=2, heads=4, kv_heads=2, ffn=128, seed=3),
                                 d / "q.gguf", "Q8_0"),
        "llama Q8_0": write_gguf(tiny_llama(hidden=64, heads=4, kv_heads=2, seed=4), d / "l.gguf", "Q8_0"),
        "qwen3 Q8_0 hd32": write_gguf(tiny_qwen3(hidden=64, layers=2, heads=2, kv_heads=1, ffn=128, seed=6),
                                      d / "q32.gguf", "Q8_0"),
        "qwen3 F16": write_gguf(tiny_qwen3(hidden=64, layers=2, heads=4, kv_heads=2, ffn=128, seed=5),
                                d / "f.gguf", "F16"),
        # llama.cpp's mix: Q4_K, with Q6_K for attn_v and ffn_down in the layers that get more bits
        "qwen3 Q4_K_M": write_gguf(tiny_qwen3(hidden=256, layers=3, heads=4, kv_heads=2, head_dim=64, ffn=512,
                                              seed=7), d / "k.gguf", "Q4_K_M"),
        # the later families (chapters 08a, 08c): head dims of 32, windows the context outgrows
        "qwen2 Q8_0": write_gguf(tiny_qwen2(hidden=128, heads=4, kv_heads=2, ffn=128, seed=8), d / "q2.gguf", "Q8_0"),
        "mistral Q8_0": write_gguf(tiny_mistral(hidden=128, heads=4, kv_heads=2, ffn=128, window=4, seed=9),
                                   d / "m.gguf", "Q8_0"),
        "gemma3 Q8_0": write_gguf(tiny_gemma3(hidden=128, heads=4, kv_heads=2, head_dim=32, ffn=128, window=4,
                                              seed=10), d / "g.gguf", "Q8_0"),
        "qwen3moe Q8_0": write_gguf(tiny_qwen3moe(hidden=64, experts=8, top_k=2, expert_ffn=32, seed=11),
                                    d / "moe.gguf", "Q8_0"),
    }


def lowered(path, kind, N, B, backend="cuda"):
    m = tffedu.load(path)
    cfg = m.config
    creator = create(cfg, m.n_ctx, {n: w.dtype for n, w in m.weights.items()})
    pages = R.PagedGraphs(creator, (8, 16, cfg.n_head_kv, cfg.head_dim), F16)
    return R.lower(pages.build(kind, N, B, 2), backend)


def ops_of(path, kind, N, B, backend="cuda"):
    g = lowered(path, kind, N, B, backend)
    return Counter(n.op for n in g.nodes if n.kind == "op"), tffedu.load(path).config.n_layer


@pytest.mark.parametrize("name", ["qwen3 Q8_0", "llama Q8_0", "qwen3 Q8_0 hd32"])
@pytest.mark.parametrize("B", [1, 4, 8])
def test_decode_fuses_the_gemv_epilogues(files, name, B):
    ops, L = ops_of(files[name], "decode", B, B)
    assert ops["matmul_swiglu"] == L and ops["matmul_add"] == 2 * L
    assert ops["swiglu"] == 0 and ops["add"] == 0
    # q, k, v: one launch (matmul_cat, read through views) of one quantization of their norm;
    # the output head reads one of the final norm
    assert ops["rmsnorm_q8"] == 2 * L + 1 and ops["matmul_cat"] == L and ops["matmul_q8"] == 1
    assert ops["matmul"] == ops["rmsnorm"] == 0
    # Qwen3's q and k rotations: one launch per block, read through two views (q's rows first); it
    # stores the K/V itself where the attention after it is the packed one
    hd32, qwen = name.endswith("hd32"), name.startswith("qwen3")
    assert ops["qk_norm_rope_pair"] + ops["qk_norm_rope_store"] == (L if qwen else 0) and ops["qk_norm_rope"] == 0
    assert ops["qk_norm_rope_store"] == (L if qwen and hd32 else 0)
    # the attention writes the o-projection's packed int8 input itself where a head is whole 32-blocks
    assert ops["paged_attention_q8"] == (L if hd32 else 0) and ops["paged_attention_varlen"] == (0 if hd32 else L)
    g = lowered(files[name], "decode", B, B)
    for a in (n for n in g.nodes if n.op == "paged_attention_q8"):
        store = a.inputs[0].inputs[0]           # q: a view of the rope op, which stored a's K/V
        assert a.attrs["stored"] is (store.op == "qk_norm_rope_store") is qwen
        if qwen:
            assert store.inputs[2] is a.inputs[2] and store.inputs[6:] == a.inputs[3:6]   # v, pages, slots
    for pair in (n for n in g.nodes if n.op in ("qk_norm_rope_pair", "qk_norm_rope_store")):
        q, k = sorted((v for v in g.nodes if v.op == "view" and v.inputs[0] is pair), key=lambda v: v.attrs["offset"])
        assert (q.name.endswith("q_rope"), k.name.endswith("k_rope"), k.attrs["offset"]) == (True, True, q.numel)
        assert q.numel + k.numel == pair.numel and [x.name for x in pair.inputs[:2]] == [q.name[:-4] + "heads",
                                                                                         k.name[:-4] + "heads"]
    for cat in (n for n in g.nodes if n.op == "matmul_cat"):
        parts = sorted((v for v in g.nodes if v.op == "view" and v.inputs[0] is cat),
                       key=lambda v: v.attrs["offset"])
        assert [v.name.rsplit(".", 1)[1] for v in parts] == ["q", "k", "v"]
        # laid end to end: every element of the planar output is in exactly one part
        assert [v.attrs["offset"] for v in parts] == np.cumsum([0] + [v.numel for v in parts[:-1]]).tolist()
        assert sum(v.numel for v in parts) == cat.numel and cat.name.endswith(".qkv")


def test_which_decode_fusions_fire_for_the_later_families(files):
    """Qwen2 and Mistral (a Llama) fuse as Llama does, the windows kept on their attention; Qwen2's
    q/k/v biases stay adds (no bias epilogue). Gemma 3: GeGLU is no SwiGLU epilogue, and a norm sits
    between each sub-block's last matmul and its residual add, so neither epilogue fires; q/k/v, the
    gate and up pair, the rotations with the K/V store, the packed attention output (read by a
    `matmul_q8` o-projection) and the norms' quantization still do."""
    for name in ("qwen2 Q8_0", "mistral Q8_0"):
        ops, L = ops_of(files[name], "decode", 1, 1)
        assert (ops["matmul_swiglu"], ops["matmul_add"], ops["matmul_cat"], ops["rmsnorm_q8"]) == (L, 2 * L, L, 2 * L + 1)
        assert ops["paged_attention_q8"] == L and ops["add"] == (3 * L if name.startswith("qwen2") else 0)
    g = lowered(files["mistral Q8_0"], "decode", 1, 1)
    assert {n.attrs.get("window") for n in g.nodes if n.op == "paged_attention_q8"} == {4}
    ops, L = ops_of(files["gemma3 Q8_0"], "decode", 1, 1)
    assert ops["matmul_swiglu"] == ops["matmul_add"] == 0 and ops["geglu"] == L and ops["add"] == 2 * L
    assert (ops["matmul_cat"], ops["qk_norm_rope_store"], ops["paged_attention_q8"]) == (2 * L, L, L)
    assert ops["matmul_q8"] == L + 1 and ops["matmul"] == L            # o-projections + head; the down ones
    assert ops["rmsnorm_q8"] == 2 * L + 1 and ops["rmsnorm"] == 2 * L   # the post-norms stay f32


@pytest.mark.parametrize("kind,N,B", [("decode", 1, 1), ("decode", 4, 4), ("prefill", 32, 2)])
def test_a_mixture_takes_its_residual_in_the_combine(files, kind, N, B):
    """Qwen3-MoE: add(x, moe_ffn(...)) -> moe_ffn_add(..., x) at every size (the combine kernel adds
    it), its k and norm kept; the attention block's residual is matmul_add's at decode."""
    ops, L = ops_of(files["qwen3moe Q8_0"], kind, N, B)
    assert ops["moe_ffn_add"] == L and ops["moe_ffn"] == 0
    assert ops["add"] == (0 if kind == "decode" else L) and ops["matmul_add"] == (L if kind == "decode" else 0)
    g = lowered(files["qwen3moe Q8_0"], kind, N, B)
    for n in (n for n in g.nodes if n.op == "moe_ffn_add"):
        x, res = n.inputs[0], n.inputs[5]
        assert n.name.endswith("ffn_res") and x.op == "rmsnorm" and x.inputs[0] is res
        assert n.attrs == {"k": 2, "norm": True} and tuple(n.shape) == tuple(res.shape)


def test_prefill_and_other_weights_keep_the_plain_ops(files):
    for name, kind, N, B in (("qwen3 Q8_0", "prefill", 16, 1), ("qwen3 Q8_0", "prefill", 32, 4),
                             ("qwen3 F16", "decode", 1, 1)):
        ops, L = ops_of(files[name], kind, N, B)
        assert ops["matmul_swiglu"] == ops["matmul_add"] == 0, (name, kind)
        assert ops["swiglu"] == L and ops["add"] == 2 * L and ops["rmsnorm"] >= 2 * L
        # only the output head's B <= 8 rows of a Q8_0 model may still run a GEMV of its norm
        assert ops["rmsnorm_q8"] == (name.endswith("Q8_0") and B <= 8)


def test_cpu_lowering_is_the_identity(files):
    ops, L = ops_of(files["qwen3 Q8_0"], "decode", 1, 1, backend="cpu")
    assert ops["matmul_swiglu"] == 0 and ops["add"] == 2 * L and "qk_norm_rope" not in ops


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["qwen3 Q8_0", "llama Q8_0", "qwen3 Q8_0 hd32", "qwen2 Q8_0", "mistral Q8_0",
                                  "gemma3 Q8_0"])
def test_fused_decode_equals_unfused_on_the_gpu(files, name, monkeypatch):
    from tffedu.engine import Engine
    prompts = [np.random.default_rng(i).integers(0, 400, 5 + 3 * i).tolist() for i in range(3)]

    def run():
        m = tffedu.load(files[name], device="cuda", n_ctx=128)
        eng = Engine(m, max_batch=4)
        reqs = [eng.add(p, max_new_tokens=12, ignore_eos=True) for p in prompts]
        reqs.append(eng.add(prompts[1], max_new_tokens=12, ignore_eos=True,   # logits come back
                            params=SamplingParams(temperature=0.9, seed=5)))
        eng.run()
        return [r.tokens for r in reqs]

    fused = run()
    monkeypatch.setattr(R, "CUDA_PASSES", [[R._fuse_qk_norm_rope]])
    assert run() == fused


@pytest.mark.parametrize("B", [1, 8])
def test_decode_of_a_mixed_k_quant_file_fuses_too(files, B):
    """Every GEMV epilogue fires for a Q4_K_M file (chapter 11c's kernels read its types); q, k and v
    share one launch only where they share a type (a Q6_K attn_v runs alone, from the same packed
    activations)."""
    m = tffedu.load(files["qwen3 Q4_K_M"])
    types = {n: w.dtype.name for n, w in m.weights.items()}
    L = m.config.n_layer
    mixed = sum(types[f"blk.{i}.attn_v.weight"] != types[f"blk.{i}.attn_q.weight"] for i in range(L))
    assert 0 < mixed < L                                        # the file really mixes them
    ops, _ = ops_of(files["qwen3 Q4_K_M"], "decode", B, B)
    assert ops["matmul_swiglu"] == L and ops["matmul_add"] == 2 * L and ops["rmsnorm_q8"] == 2 * L + 1
    assert ops["swiglu"] == ops["add"] == ops["matmul"] == ops["rmsnorm"] == 0
    assert ops["matmul_cat"] == L and ops["matmul_q8"] == 1 + mixed


def test_gate_and_up_of_two_types_stay_two_matmuls(tmp_path, monkeypatch):
    "One kernel reads both weights of matmul_swiglu: a file whose ffn_up has another type than ffn_gate keeps them apart."
    import hf_models
    plain = hf_models.tensor_type
    monkeypatch.setattr(hf_models, "tensor_type",
                        lambda wtype, g, n, row: "Q6_K" if g.endswith("ffn_up.weight") else plain(wtype, g, n, row))
    path = write_gguf(tiny_qwen3(hidden=256, layers=2, heads=4, kv_heads=2, head_dim=64, ffn=512, seed=8),
                      tmp_path / "m.gguf", "Q4_K_M")
    ops, L = ops_of(path, "decode", 1, 1)
    assert ops["matmul_swiglu"] == 0 and ops["swiglu"] == L
