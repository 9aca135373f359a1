"""Gemma 3 (text) on the CPU against HF transformers' Gemma3ForCausalLM float32 (chapter 08c): random
models of several shapes written as GGUF the way llama.cpp's converter does (norm weights + 1, the
window keys) and saved as HF folders; the config readers against transformers' Gemma3TextConfig and
llama.cpp's layer pattern."""
import dataclasses
import json

import numpy as np
import pytest
import torch

import tffedu
import tffedu.model
from tffedu.config import ARCHS, config_from_gguf, config_from_hf
from tffedu.errors import ConfigError
from hf_models import hf_logits, rel_err, save_bf16, tiny_gemma3, write_gguf
from test_sliding_window import argmax_chain

TOL = 1e-4
PROMPT = [11, 250, 3, 499, 17, 17, 64, 128, 5, 300, 42, 7, 8, 9, 10, 400, 401, 2]
ALT = ["sliding_attention", "full_attention"] * 3      # a pattern of its own: written as flags

# name -> (shape kwargs, weight type); every window is shorter than PROMPT, every model has both kinds of layer
CASES = {
    "gqa2-hd32-7layers": (dict(hidden=64, heads=4, kv_heads=2, head_dim=32, layers=7, window=4), "F32"),
    "mqa-hd64-window3-Q8_0": (dict(hidden=64, heads=2, kv_heads=1, head_dim=64, layers=6, ffn=128, window=3), "Q8_0"),
    "mha-untied-BF16": (dict(hidden=96, heads=3, kv_heads=3, head_dim=32, layers=6, ffn=160, tied=False,
                             window=5), "BF16"),
    "alternating-layers": (dict(hidden=64, heads=4, kv_heads=2, head_dim=16, layers=6, window=4,
                                layer_types=ALT), "F32"),
    "linear-rope-x4-on-full-layers": (dict(hidden=64, heads=4, kv_heads=2, head_dim=32, layers=6, window=4,
                                           rope_scaling={"rope_type": "linear", "factor": 4.0}), "F32"),
}


@pytest.fixture(scope="module", params=list(CASES))
def pair(request, tmp_path_factory):
    kw, wtype = CASES[request.param]
    hf = tiny_gemma3(seed=len(request.param), **kw)
    return hf, write_gguf(hf, tmp_path_factory.mktemp("gguf") / f"{request.param}.gguf", wtype)


def test_logits_match_hf(pair):
    hf, path = pair
    ref = hf_logits(hf, PROMPT)
    for m in (tffedu.model.load(path), tffedu.load(path)):   # chapter 08's contiguous cache, the engine
        c = m.config
        assert (c.arch, c.sliding_window) == ("gemma3", hf.config.sliding_window)
        assert c.full_layers == tuple(i for i, t in enumerate(hf.config.layer_types) if t == "full_attention")
        assert rel_err(m.logits(PROMPT), ref) < TOL


def test_greedy_and_decode_match(pair):
    hf, path = pair
    m = tffedu.load(path)
    assert m.generate(PROMPT[:5], max_new_tokens=20, ignore_eos=True).tokens == argmax_chain(hf, PROMPT[:5], 20)
    with torch.no_grad():
        ref = hf.generate(torch.tensor([PROMPT[:5]]), max_new_tokens=20, do_sample=False,
                          eos_token_id=sorted(m.eos_ids))[0, 5:].tolist()
    assert m.generate(PROMPT[:5], max_new_tokens=20).tokens == ref
    c = tffedu.model.load(path)                 # decode steps over the contiguous cache == one prefill
    full = c.logits(PROMPT)
    steps = [c.forward(PROMPT[:6], 0)[-1].copy()] + [c.forward([t], 6 + i)[0].copy()
                                                     for i, t in enumerate(PROMPT[6:])]
    assert rel_err(np.stack(steps), full[5:]) < 1e-5


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_hf_folder(tmp_path, dtype):
    """A HF folder: Gemma's four norms by their HF names, the norm weights + 1 at load, the queries'
    scale from query_pre_attn_scalar (here not head_dim, as in the 27B model); BF16 in shards."""
    hf = tiny_gemma3(seed=7, hidden=64, heads=4, kv_heads=2, head_dim=32, layers=7, window=4,
                     query_pre_attn_scalar=48)
    if dtype == "bfloat16":
        save_bf16(hf, tmp_path)
    else:
        hf.save_pretrained(tmp_path)
    m = tffedu.load(tmp_path)
    assert (m.config.full_layers, m.config.rope_base_swa) == ((5,), 1e4)
    assert m.config.attn_scale == pytest.approx(48 ** -0.5)
    ref = hf_logits(hf, PROMPT)
    assert rel_err(m.logits(PROMPT), ref) < TOL
    unscaled = tffedu.model.ContiguousModel(m.source, "cpu", warm=False)     # the same weights, scale 1/sqrt(hd)
    unscaled.creator.cfg = dataclasses.replace(m.config, attn_scale=0.0)
    assert rel_err(unscaled.logits(PROMPT), ref) > 1e-3
    assert m.source._shift("blk.0.post_attention_norm.weight") == 1.0 and m.source._shift("blk.0.attn_q.weight") == 0


def test_every_part_matters(tmp_path):
    "Leave out any one of Gemma's changes and the logits move far from HF's (so the tests above can fail)."
    from tffedu.models.gemma3 import Gemma3Creator
    from tffedu.models.qwen3 import Qwen3Creator
    hf = tiny_gemma3(seed=9, window=4)
    src = tffedu.model.load(write_gguf(hf, tmp_path / "g.gguf")).source
    ref = hf_logits(hf, PROMPT)

    def err(cfg=None, cls=Gemma3Creator):
        m = tffedu.model.ContiguousModel(src, "cpu", warm=False)
        m.creator = cls(cfg or src.config, m.n_ctx)
        return rel_err(m.logits(PROMPT), ref)

    class SiLU(Gemma3Creator):
        ffn_act = "swiglu"

    class Unscaled(Gemma3Creator):
        embed = Qwen3Creator.embed

    c = src.config
    assert err() < TOL
    for e in (err(cls=SiLU), err(cls=Unscaled), err(dataclasses.replace(c, sliding_window=0, full_layers=())),
              err(dataclasses.replace(c, rope_base_swa=0.0)), err(dataclasses.replace(c, full_layers=()))):
        assert e > 1e-3


# ---- the config ------------------------------------------------------------------------------------
def _hf_cfg(**kw) -> dict:
    import transformers
    return json.loads(transformers.Gemma3TextConfig(hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                                                    head_dim=32, intermediate_size=96, vocab_size=100,
                                                    **kw).to_json_string())


@pytest.mark.parametrize("n_layer", [1, 5, 6, 7, 26, 34, 62])
def test_hf_layer_types_are_llamacpps_pattern(n_layer):
    "transformers' own default layer types == llama.cpp's default pattern (every 6th layer full)."
    c = config_from_hf(_hf_cfg(num_hidden_layers=n_layer, sliding_window=512))
    assert c.full_layers == tuple(range(5, n_layer, 6)) and c.rope_base_swa == 1e4 and c.rope_base == 1e6
    meta = {"general.architecture": "gemma3", "gemma3.block_count": n_layer, "gemma3.embedding_length": 64,
            "gemma3.attention.head_count": 4, "gemma3.attention.key_length": 32, "gemma3.feed_forward_length": 96,
            "gemma3.attention.layer_norm_rms_epsilon": 1e-6, "gemma3.attention.sliding_window": 512,
            "gemma3.vocab_size": 100}
    g = config_from_gguf(meta)
    assert (g.full_layers, g.rope_base_swa) == (c.full_layers, 1e4)
    assert g.attn_scale == (pytest.approx(1 / np.sqrt(64 / 4)) if n_layer == 62 else 0.0)   # llama.cpp's 27B rule
    assert config_from_gguf({**meta, "gemma3.attention.sliding_window_pattern": 2}).full_layers == tuple(range(1, n_layer, 2))
    flags = [i % 3 != 0 for i in range(n_layer)]
    assert config_from_gguf({**meta, "gemma3.attention.sliding_window_pattern": flags}).full_layers == \
        tuple(range(0, n_layer, 3))
    assert config_from_gguf({**meta, "gemma3.rope.freq_base_swa": 5e3}).rope_base_swa == 5e3


def test_older_hf_configs_and_refusals():
    old = {"model_type": "gemma3_text", "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
           "head_dim": 32, "intermediate_size": 96, "vocab_size": 100, "num_hidden_layers": 12,
           "sliding_window": 8, "sliding_window_pattern": 6, "rope_theta": 1e6, "rope_local_base_freq": 1e4,
           "query_pre_attn_scalar": 32}                      # transformers 4's keys
    c = config_from_hf(old)
    assert (c.full_layers, c.rope_base, c.rope_base_swa, c.attn_scale) == ((5, 11), 1e6, 1e4, 0.0)
    for bad, match in [({"use_bidirectional_attention": True}, "bidirectional"),
                       ({"final_logit_softcapping": 30.0}, "soft-cap"),
                       ({"attn_logit_softcapping": 50.0}, "soft-cap"),
                       ({"layer_types": ["sliding_attention", "local"] * 6}, "layer_types"),
                       ({"layer_types": ["sliding_attention"] * 3}, "layer_types"),
                       ({"query_pre_attn_scalar": -4}, "query_pre_attn_scalar"),
                       ({"sliding_window_pattern": "six"}, "layer_types")]:
        with pytest.raises(ConfigError, match=match):
            config_from_hf({**old, **bad})
    meta = {"general.architecture": "gemma3", "gemma3.block_count": 4, "gemma3.embedding_length": 64,
            "gemma3.attention.head_count": 4, "gemma3.feed_forward_length": 96, "gemma3.vocab_size": 100,
            "gemma3.attention.layer_norm_rms_epsilon": 1e-6, "gemma3.attention.sliding_window": 8}
    for pattern in ([True] * 3, [1, 0, 1, 1], -1, 1 << 20, "x"):
        with pytest.raises(ConfigError, match="sliding_window_pattern"):
            config_from_gguf({**meta, "gemma3.attention.sliding_window_pattern": pattern})


def test_the_row_is_transformers_model():
    "Gemma 3's row against transformers' class: q/k norms, four norms per layer, no biases."
    a = ARCHS["gemma3"]
    assert (a.rope_type, a.qk_norm, a.post_norms, a.attn_bias, a.full_every) == ("neox", True, True, (), 6)


def test_generate_batch_equals_each_alone(tmp_path):
    "The engine's batches of prompts of several lengths, each layer with its window: each equals HF alone."
    hf = tiny_gemma3(seed=17, window=3)
    m = tffedu.load(write_gguf(hf, tmp_path / "g.gguf"))
    prompts = [PROMPT[:2], PROMPT[:9], PROMPT[1:18]]
    got = [g.tokens for g in m.generate_batch(prompts, max_new_tokens=8, ignore_eos=True)]
    assert got == [argmax_chain(hf, p, 8) for p in prompts]
