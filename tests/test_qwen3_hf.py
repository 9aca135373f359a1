"""Qwen3, Llama and Qwen2 end to end on the CPU against HF transformers float32 (chapter 08).

Each case builds a seeded random HF model, writes it as GGUF the way llama.cpp does
(tests/hf_models.py), loads the GGUF with tffedu and compares logits with HF's forward pass on the
HF model itself (for lossy weight types, HF holds gguf-py's dequantization of what we wrote).
"""
import numpy as np
import pytest

import tffedu.model
from tffedu.errors import ContextOverflowError, ModelError
from hf_models import LLAMA3_ROPE, hf_logits, rel_err, save_bf16, tiny_llama, tiny_qwen2, tiny_qwen3, write_gguf

TOL = 1e-4        # max |ours - HF| relative to max |HF| (the bar)
PROMPT = [11, 250, 3, 499, 17, 17, 64, 128, 5, 300, 42]

# name -> (builder, shape kwargs, weight type)
CASES = {
    "qwen3-gqa4-hd16-untied": (tiny_qwen3, dict(hidden=64, heads=8, kv_heads=2, head_dim=16), "F32"),
    "qwen3-mqa8-hidden96-tied": (tiny_qwen3, dict(hidden=96, heads=8, kv_heads=1, head_dim=32,
                                                  ffn=160, tied=True), "F32"),
    "qwen3-mha-hidden160": (tiny_qwen3, dict(hidden=160, heads=5, kv_heads=5, head_dim=32,
                                             ffn=224, layers=3), "F32"),
    "qwen3-gqa4-F16": (tiny_qwen3, dict(hidden=64, heads=8, kv_heads=2, head_dim=16), "F16"),
    "qwen3-gqa4-BF16": (tiny_qwen3, dict(hidden=64, heads=8, kv_heads=2, head_dim=16), "BF16"),
    "qwen3-gqa4-Q8_0": (tiny_qwen3, dict(hidden=64, heads=8, kv_heads=2, head_dim=16), "Q8_0"),
    "qwen3-mqa8-tied-Q8_0": (tiny_qwen3, dict(hidden=96, heads=8, kv_heads=1, head_dim=32,
                                              ffn=160, tied=True), "Q8_0"),
    "llama-gqa3-tied": (tiny_llama, dict(hidden=96, heads=6, kv_heads=2, ffn=160), "F32"),
    "llama-gqa4-untied-Q8_0": (tiny_llama, dict(hidden=64, heads=4, kv_heads=1, tied=False), "Q8_0"),
    "llama-linear-rope-x4": (tiny_llama, dict(rope_scaling={"rope_type": "linear", "factor": 4.0}), "F32"),
    # Llama 3.1's RoPE (llama.cpp writes rope_freqs.weight): with an original context of 64 tokens, pairs
    # of this head_dim 16 fall on every side of the blend (kept, slowed 8x, in between)
    "llama-llama3-rope": (tiny_llama, dict(hidden=64, heads=4, kv_heads=2, rope_scaling=LLAMA3_ROPE), "F32"),
    "llama-llama3-rope-Q8_0": (tiny_llama, dict(hidden=128, heads=4, kv_heads=1, tied=False,
                                                rope_scaling=dict(LLAMA3_ROPE, factor=32.0)), "Q8_0"),
    # attention_bias: q, k, v and o biases (random: HF starts them at 0), Llama's q/k biases permuted
    "qwen3-gqa4-bias": (tiny_qwen3, dict(hidden=64, heads=8, kv_heads=2, head_dim=16, attention_bias=True), "F32"),
    "llama-gqa3-bias-Q8_0": (tiny_llama, dict(hidden=96, heads=6, kv_heads=2, ffn=160, attention_bias=True), "Q8_0"),
    # Qwen2 / Qwen2.5: q, k and v biases by architecture, no q/k norms, NEOX RoPE, theta 1e6
    "qwen2-gqa4-untied": (tiny_qwen2, dict(hidden=64, heads=8, kv_heads=2), "F32"),
    "qwen2-gqa7-tied-hidden112": (tiny_qwen2, dict(hidden=112, heads=7, kv_heads=1, ffn=192, tied=True), "F32"),
    "qwen2-mha-3layers-BF16": (tiny_qwen2, dict(hidden=96, heads=3, kv_heads=3, layers=3), "BF16"),
    "qwen2-gqa4-Q8_0": (tiny_qwen2, dict(hidden=64, heads=8, kv_heads=2), "Q8_0"),
    # the files people download: llama.cpp's mixes (Q4_K_M: Q4_K, with Q6_K for output, attn_v and
    # ffn_down in the layers that get more bits; rows that are not whole 256-blocks fall back to
    # Q5_0/Q5_1/Q8_0 as llama-quantize does) and the 32-weight formats
    "qwen3-hidden256-Q4_K_M": (tiny_qwen3, dict(hidden=256, heads=4, kv_heads=2, head_dim=64, ffn=512,
                                                 layers=3), "Q4_K_M"),
    "llama-hidden256-tied-Q5_K_M": (tiny_llama, dict(hidden=256, heads=4, kv_heads=1, ffn=768), "Q5_K_M"),
    "qwen3-hidden256-Q6_K": (tiny_qwen3, dict(hidden=256, heads=2, kv_heads=1, head_dim=128, ffn=256,
                                               tied=True), "Q6_K"),
    "qwen3-fallbacks-Q4_K_M": (tiny_qwen3, dict(hidden=64, heads=8, kv_heads=2, head_dim=32, ffn=256), "Q4_K_M"),
    # the formats no GPU kernel reads (dequantized for it; on the CPU like every type): Q3_K_M and Q2_K
    # files mix them with Q4_0 / Q5_K rows, IQ4_XS with IQ4_NL; the codebook formats via gguf-py
    "qwen3-hidden256-Q3_K_M": (tiny_qwen3, dict(hidden=256, heads=4, kv_heads=2, head_dim=64, ffn=320), "Q3_K_M"),
    "llama-hidden256-Q2_K": (tiny_llama, dict(hidden=256, heads=4, kv_heads=2, ffn=512, tied=False), "Q2_K"),
    "qwen3-hidden256-IQ4_XS": (tiny_qwen3, dict(hidden=256, heads=4, kv_heads=1, head_dim=64, ffn=288), "IQ4_XS"),
    "qwen2-gqa4-IQ4_NL": (tiny_qwen2, dict(hidden=64, heads=8, kv_heads=2), "IQ4_NL"),
    "llama-hidden256-IQ2_XXS": (tiny_llama, dict(hidden=256, heads=4, kv_heads=2, ffn=512), "IQ2_XXS"),
    "qwen3-hidden256-IQ3_S": (tiny_qwen3, dict(hidden=256, heads=4, kv_heads=2, head_dim=64, ffn=512), "IQ3_S"),
    "llama-gqa4-Q4_0": (tiny_llama, dict(hidden=64, heads=4, kv_heads=1, tied=False), "Q4_0"),
    "qwen2-gqa4-Q5_1": (tiny_qwen2, dict(hidden=96, heads=6, kv_heads=2, ffn=160), "Q5_1"),
}


@pytest.fixture(scope="module", params=list(CASES))
def pair(request, tmp_path_factory):
    "(HF model, tffedu Model) describing the same weights."
    build, kw, wtype = CASES[request.param]
    hf = build(seed=len(request.param), **kw)
    path = write_gguf(hf, tmp_path_factory.mktemp("gguf") / f"{request.param}.gguf", wtype)
    return hf, tffedu.model.load(path)


def test_logits_match_hf(pair):
    hf, ours = pair
    got = ours.logits(PROMPT)
    ref = hf_logits(hf, PROMPT)
    assert got.shape == ref.shape == (len(PROMPT), hf.config.vocab_size)
    assert got.dtype == np.float32
    assert rel_err(got, ref) < TOL


def test_greedy_continuation_matches_hf(pair):
    import torch
    hf, ours = pair
    with torch.no_grad():
        ref = hf.generate(torch.tensor([PROMPT[:5]]), max_new_tokens=12, do_sample=False,
                          eos_token_id=sorted(ours.eos_ids))   # stop where we stop (llama.cpp's EOG set)
    ref = ref[0, 5:].tolist()
    assert ours.generate(PROMPT[:5], max_new_tokens=12).tokens == ref


def test_decode_steps_equal_prefill(pair):
    "Logits of token t from the KV-cache decode path equal row t of a full prefill."
    hf, ours = pair
    full = ours.logits(PROMPT)
    first = ours.forward(PROMPT[:6], 0)[-1].copy()
    steps = [ours.forward([t], 6 + i)[0].copy() for i, t in enumerate(PROMPT[6:])]
    assert rel_err(np.stack([first] + steps), full[5:]) < 1e-5


def test_logits_keep_no_state():
    hf = tiny_qwen3(seed=3)
    import tempfile, pathlib
    with tempfile.TemporaryDirectory() as d:
        m = tffedu.model.load(write_gguf(hf, pathlib.Path(d) / "m.gguf"))
        a = m.logits(PROMPT[:4])
        m.generate(PROMPT, max_new_tokens=5)      # fills the cache with another sequence
        b = m.logits(PROMPT[:4])
        np.testing.assert_array_equal(a, b)
        assert rel_err(m.logits(PROMPT[:1]), hf_logits(hf, PROMPT[:1])) < TOL


def test_context_overflow_and_bad_ids(tmp_path):
    hf = tiny_qwen3(seed=4)
    m = tffedu.model.load(write_gguf(hf, tmp_path / "m.gguf"), n_ctx=16)
    with pytest.raises(ContextOverflowError, match="context of 16"):
        m.generate(PROMPT, max_new_tokens=6)       # 11 + 6 > 16
    assert len(m.generate(PROMPT, max_new_tokens=5).tokens) <= 5
    with pytest.raises(ContextOverflowError):
        m.logits(list(range(17)))
    with pytest.raises(ModelError, match="outside the vocabulary"):
        m.logits([1, hf.config.vocab_size])


def test_missing_weight_is_named(tmp_path):
    import gguf
    hf = tiny_qwen3(seed=5, layers=1)
    src = write_gguf(hf, tmp_path / "full.gguf")
    r = gguf.GGUFReader(src)
    w = gguf.GGUFWriter(tmp_path / "cut.gguf", "qwen3")
    for k, f in r.fields.items():
        if k.startswith("GGUF.") or k == "general.architecture":
            continue
        vt = f.types[0]
        val = f.contents()
        if vt == gguf.GGUFValueType.ARRAY:
            w.add_array(k, val)
        else:
            w.add_key_value(k, val, vt)
    for t in r.tensors:
        if t.name != "blk.0.ffn_up.weight":
            w.add_tensor(t.name, np.array(t.data), raw_shape=list(reversed(t.shape.tolist())),
                         raw_dtype=t.tensor_type)
    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
    with pytest.raises(ModelError, match="blk.0.ffn_up.weight"):
        tffedu.model.load(tmp_path / "cut.gguf")


@pytest.mark.parametrize("build", [tiny_qwen3, tiny_llama, tiny_qwen2], ids=["qwen3", "llama", "qwen2"])
def test_hf_folder_loads_too(build, tmp_path):
    "A HF folder (config.json + model.safetensors) runs the same graphs; Llama Q/K get permuted."
    hf = build(seed=8, hidden=64, heads=4, kv_heads=2)
    hf.save_pretrained(tmp_path)
    m = tffedu.model.load(tmp_path)
    assert m.config.arch == hf.config.model_type
    assert rel_err(m.logits(PROMPT), hf_logits(hf, PROMPT)) < TOL


def test_llama3_rope_hf_folder(tmp_path):
    """Llama 3.1's folder: rope_scaling 'llama3' in config.json, the factors computed as llama.cpp's
    converter would write them; HF's logits."""
    hf = tiny_llama(seed=9, hidden=64, heads=4, kv_heads=2, rope_scaling=LLAMA3_ROPE)
    hf.save_pretrained(tmp_path)
    m = tffedu.model.load(tmp_path)
    assert len(m.config.rope_factors) == 8 and "8 pairs, 1 .. 8" in "\n".join(m.config.lines())
    assert rel_err(m.logits(PROMPT), hf_logits(hf, PROMPT)) < TOL


def test_llama3_rope_scaling_checks_its_keys():
    from tffedu.config import llama3_rope_factors
    from tffedu.errors import ConfigError
    with pytest.raises(ConfigError, match="'low_freq_factor'"):
        llama3_rope_factors({"factor": 8.0}, 16, 1e4)
    with pytest.raises(ConfigError, match="low_freq_factor < high_freq_factor"):
        llama3_rope_factors(dict(LLAMA3_ROPE, low_freq_factor=4.0), 16, 1e4)


def test_qwen2_bf16_sharded_folder_like_qwen25(tmp_path):
    """Qwen2.5's release layout: BF16 weights in shards with an index file (max_shard_size), tied
    output; the logits of HF's model in BF16 weights (computed in float32), and greedy tokens."""
    import torch
    hf = tiny_qwen2(seed=11, hidden=96, heads=6, kv_heads=2, ffn=160, tied=True)
    save_bf16(hf, tmp_path)                     # BF16 weights: HF's reference holds the same values
    assert (tmp_path / "model.safetensors.index.json").exists() and len(list(tmp_path.glob("*.safetensors"))) > 2
    m = tffedu.model.load(tmp_path)
    assert (m.config.arch, m.config.attn_bias, m.config.qk_norm) == ("qwen2", ("attn_q", "attn_k", "attn_v"), False)
    assert rel_err(m.logits(PROMPT), hf_logits(hf, PROMPT)) < TOL
    with torch.no_grad():
        ref = hf.generate(torch.tensor([PROMPT[:5]]), max_new_tokens=10, do_sample=False,
                          eos_token_id=sorted(m.eos_ids))[0, 5:].tolist()
    assert m.generate(PROMPT[:5], max_new_tokens=10).tokens == ref


def test_qwen2_sliding_window_is_refused(tmp_path):
    hf = tiny_qwen2(seed=2)
    hf.config.use_sliding_window, hf.config.sliding_window = True, 16
    hf.save_pretrained(tmp_path)
    with pytest.raises(ModelError, match="use_sliding_window"):
        tffedu.model.load(tmp_path)


@pytest.mark.parametrize("build", [tiny_qwen3, tiny_llama], ids=["qwen3", "llama"])
def test_hf_folder_with_attention_bias(build, tmp_path, monkeypatch):
    """HF's `attention_bias=True` (biases on q, k, v and o) from a HF folder through tffedu.load: the
    logits of HF's own model, and far from those of the same model without its biases (so the check
    would see a bias left out, or a Llama q/k bias not permuted like its rows)."""
    import copy
    import torch
    from tffedu.config import ATTN_PROJ
    hf = build(seed=9, hidden=64, heads=4, kv_heads=2, attention_bias=True)
    hf.save_pretrained(tmp_path)
    m = tffedu.load(tmp_path)
    assert m.config.attn_bias == ATTN_PROJ
    ref = hf_logits(hf, PROMPT)
    assert rel_err(m.logits(PROMPT), ref) < TOL
    plain = copy.deepcopy(hf)
    with torch.no_grad():
        for name, p in plain.named_parameters():
            if name.endswith(".bias"):
                p.zero_()
    assert rel_err(hf_logits(plain, PROMPT), ref) > 1e-2
    if build is tiny_llama:     # and a Llama's q/k biases left in HF's order (only the weights permuted)
        from tffedu.safetensors import HFModel
        permuted = HFModel._permuted
        monkeypatch.setattr(HFModel, "_permuted", lambda self, n: permuted(self, n) and n.endswith(".weight"))
        assert rel_err(tffedu.model.load(tmp_path).logits(PROMPT), ref) > 1e-3
