"""Chapter 07 exercises: RMSNorm, RoPE and grouped-query attention in numpy. References: HF
transformers' Qwen3 modules and torch's scaled_dot_product_attention."""
import numpy as np
import torch
from transformers.models.qwen3.modeling_qwen3 import Qwen3RMSNorm, apply_rotary_pos_emb

rng = np.random.default_rng(0)


def rel(a, b):
    return float(np.abs(np.asarray(a, np.float64) - b).max() / (np.abs(b).max() + 1e-30))


def test_ch07_1_rmsnorm(impl):
    x = rng.standard_normal((5, 64)).astype(np.float32) * 3
    w = rng.standard_normal(64).astype(np.float32)
    ref = Qwen3RMSNorm(64, eps=1e-6)
    ref.weight.data = torch.from_numpy(w)
    assert rel(impl.rmsnorm(x, w, 1e-6), ref(torch.from_numpy(x)).detach().numpy()) < 1e-5


def test_ch07_2_rope_neox(impl):
    T, H, D, theta = 6, 3, 32, 1e6
    x = rng.standard_normal((T, H, D)).astype(np.float32)
    pos = np.array([0, 1, 2, 17, 500, 4095])
    inv = 1.0 / theta ** (torch.arange(0, D, 2).double() / D)
    emb = torch.cat([torch.outer(torch.tensor(pos).double(), inv)] * 2, -1)
    xt = torch.from_numpy(x).double().transpose(0, 1)[None]          # [1, H, T, D]
    ref, _ = apply_rotary_pos_emb(xt, xt, emb.cos()[None], emb.sin()[None])
    assert rel(impl.rope_neox(x, pos, theta), ref[0].transpose(0, 1).numpy()) < 1e-5


def test_ch07_3_gqa_attention(impl):
    T, Hq, Hkv, D = 7, 8, 2, 16
    q = rng.standard_normal((T, Hq, D)).astype(np.float32)
    k = rng.standard_normal((T, Hkv, D)).astype(np.float32)
    v = rng.standard_normal((T, Hkv, D)).astype(np.float32)
    t = lambda a: torch.from_numpy(a).transpose(0, 1)[None]           # [1, H, T, D]
    ref = torch.nn.functional.scaled_dot_product_attention(t(q), t(k), t(v), is_causal=True, enable_gqa=True)
    assert rel(impl.gqa_attention(q, k, v), ref[0].transpose(0, 1).numpy()) < 1e-5


def _tiled(q, k, v):                          # np.tile: head h reads KV head h % Hkv, not h // g
    from solutions.ch07 import gqa_attention
    g = q.shape[1] // k.shape[1]
    return gqa_attention(q, np.tile(k, (1, g, 1)), np.tile(v, (1, g, 1)))


def _interleaved(x, pos, theta=10000.0):       # rotates adjacent pairs: llama.cpp's "norm" mode
    x = np.asarray(x, np.float32)
    D = x.shape[-1]
    inv = theta ** (-np.arange(0, D, 2) / D)
    ang = np.asarray(pos)[:, None, None] * inv
    a, b = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2], out[..., 1::2] = a * np.cos(ang) - b * np.sin(ang), b * np.cos(ang) + a * np.sin(ang)
    return out


WRONG = {"test_ch07_1_rmsnorm": {"no-mean": {"rmsnorm": lambda x, w, eps=1e-6:
             x / np.sqrt((x * x).sum(-1, keepdims=True) + eps) * w}},
         "test_ch07_2_rope_neox": {"adjacent-pairs": {"rope_neox": _interleaved}},
         "test_ch07_3_gqa_attention": {"tile-heads": {"gqa_attention": _tiled}}}
