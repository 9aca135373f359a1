"""Chapter 03b exercises: a KV cache's bytes and a Qwen3's parameter count, from a ModelConfig.
References: HF transformers — the cache it fills, and the parameters of the model it builds."""
import pytest
import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

from tffedu.config import config_from_hf

CONFIGS = [dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                head_dim=32, intermediate_size=80, vocab_size=96, tie_word_embeddings=False),
           dict(hidden_size=48, num_hidden_layers=3, num_attention_heads=6, num_key_value_heads=3,
                head_dim=16, intermediate_size=64, vocab_size=128, tie_word_embeddings=True)]


def hf(kw):
    torch.manual_seed(0)
    hc = Qwen3Config(**kw, max_position_embeddings=256)
    return Qwen3ForCausalLM(hc).eval(), config_from_hf({**hc.to_dict(), "model_type": "qwen3"})


@pytest.mark.parametrize("kw", CONFIGS, ids=["untied", "tied"])
def test_ch03b_1_kv_cache_bytes(impl, kw):
    model, cfg = hf(kw)
    with torch.no_grad():
        out = model(torch.arange(7)[None], use_cache=True)
    cache = out.past_key_values
    ref = sum(t.numel() * t.element_size() for layer in cache.layers for t in (layer.keys, layer.values))
    assert impl.kv_cache_bytes(cfg, 7, bytes_per_value=4) == ref


@pytest.mark.parametrize("kw", CONFIGS, ids=["untied", "tied"])
def test_ch03b_2_qwen3_param_count(impl, kw):
    model, cfg = hf(kw)
    assert impl.qwen3_param_count(cfg) == sum(p.numel() for p in model.parameters())


def _no_qk_norm(cfg):
    from solutions.ch03b import qwen3_param_count
    return qwen3_param_count(cfg) - cfg.n_layer * 2 * cfg.head_dim


WRONG = {"test_ch03b_1_kv_cache_bytes": {"query-heads": {"kv_cache_bytes": lambda cfg, n, b=2:
             2 * cfg.n_layer * cfg.n_head * cfg.head_dim * n * b}},
         "test_ch03b_2_qwen3_param_count": {"no-qk-norm": {"qwen3_param_count": _no_qk_norm}}}
