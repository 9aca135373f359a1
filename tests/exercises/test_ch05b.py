"""Chapter 05b exercises: the FLOPs of a Qwen3 block. Reference: torch's FlopCounterMode over HF
transformers' own Qwen3DecoderLayer, prefill and a decode step on a cache."""
import types

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode
from transformers import DynamicCache, Qwen3Config
from transformers.models.qwen3.modeling_qwen3 import Qwen3DecoderLayer, Qwen3RotaryEmbedding

SHAPES = [dict(hidden_size=64, intermediate_size=96, num_attention_heads=4, num_key_value_heads=2, head_dim=32),
          dict(hidden_size=48, intermediate_size=80, num_attention_heads=6, num_key_value_heads=1, head_dim=16)]


def setup(kw):
    cfg = Qwen3Config(**kw, max_position_embeddings=256, num_hidden_layers=1)
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    ours = types.SimpleNamespace(hidden_size=kw["hidden_size"], n_head=kw["num_attention_heads"],
                                 n_head_kv=kw["num_key_value_heads"], head_dim=kw["head_dim"],
                                 ffn_size=kw["intermediate_size"])
    return cfg, Qwen3DecoderLayer(cfg, 0).eval(), Qwen3RotaryEmbedding(cfg), ours


def count(layer, rot, x, past=None, offset=0):
    T = x.shape[1]
    pos = torch.arange(offset, offset + T)[None]
    S = offset + T
    mask = torch.full((T, S), float("-inf")).triu(offset + 1)[None, None]
    with FlopCounterMode(display=False) as fc, torch.no_grad():
        layer(x, attention_mask=mask, position_embeddings=rot(x, pos), position_ids=pos,
              past_key_values=past, use_cache=past is not None)
    return fc


@pytest.mark.parametrize("kw", SHAPES, ids=["gqa2", "mqa"])
def test_ch05b_1_projection_flops(impl, kw):
    cfg, layer, rot, ours = setup(kw)
    fc = count(layer, rot, torch.randn(1, 7, kw["hidden_size"]))
    mm = fc.get_flop_counts()["Global"]
    assert impl.projection_flops(ours, 7) == mm[torch.ops.aten.mm]


@pytest.mark.parametrize("kw", SHAPES, ids=["gqa2", "mqa"])
def test_ch05b_2_block_matmul_flops(impl, kw):
    cfg, layer, rot, ours = setup(kw)
    assert impl.block_matmul_flops(ours, 7) == count(layer, rot, torch.randn(1, 7, kw["hidden_size"])).get_total_flops()
    cache = DynamicCache(config=cfg)
    count(layer, rot, torch.randn(1, 9, kw["hidden_size"]), cache)                 # fill 9 positions
    step = count(layer, rot, torch.randn(1, 1, kw["hidden_size"]), cache, offset=9)
    assert impl.block_matmul_flops(ours, 1, past=9) == step.get_total_flops()


def _mha(cfg, T):                               # as if K and V had a head per query head
    h, hd = cfg.hidden_size, cfg.head_dim
    return 4 * 2 * T * h * cfg.n_head * hd + 3 * 2 * T * h * cfg.ffn_size


WRONG = {"test_ch05b_1_projection_flops": {"no-gqa": {"projection_flops": _mha}},
         "test_ch05b_2_block_matmul_flops": {"new-keys-only": {"block_matmul_flops": lambda cfg, T, past=0:
             __import__("solutions.ch05b", fromlist=["x"]).projection_flops(cfg, T) + 4 * T * T * cfg.head_dim * cfg.n_head}}}
