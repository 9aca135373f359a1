"""Chapter 08 exercises: the two halves of a Qwen3 block in numpy. Reference: HF transformers'
Qwen3MLP and Qwen3Attention with their own weights."""
import numpy as np
import torch
from transformers import Qwen3Config
from transformers.models.qwen3.modeling_qwen3 import Qwen3Attention, Qwen3MLP, Qwen3RotaryEmbedding

CFG = Qwen3Config(hidden_size=64, intermediate_size=96, num_attention_heads=4, num_key_value_heads=2,
                  head_dim=32, rope_theta=10000.0, rms_norm_eps=1e-6, max_position_embeddings=256)
CFG._attn_implementation = "eager"


def rel(a, b):
    return float(np.abs(np.asarray(a, np.float64) - b).max() / np.abs(b).max())


def np_(p):
    return p.detach().numpy()


def test_ch08_1_swiglu_mlp(impl):
    torch.manual_seed(0)
    mlp = Qwen3MLP(CFG)
    x = torch.randn(5, 64)
    got = impl.swiglu_mlp(x.numpy(), np_(mlp.gate_proj.weight), np_(mlp.up_proj.weight), np_(mlp.down_proj.weight))
    assert rel(got, np_(mlp(x))) < 1e-5


def test_ch08_2_qwen3_attention(impl):
    torch.manual_seed(1)
    att = Qwen3Attention(CFG, layer_idx=0).eval()
    for p in (att.q_norm.weight, att.k_norm.weight):
        p.data = 1 + 0.3 * torch.randn_like(p)
    T = 6
    x = torch.randn(1, T, 64)
    pos = torch.arange(T)[None]
    cos, sin = Qwen3RotaryEmbedding(CFG)(x, pos)
    mask = torch.full((T, T), float("-inf")).triu(1)[None, None]
    with torch.no_grad():
        ref, _ = att(x, position_embeddings=(cos, sin), attention_mask=mask)
    got = impl.qwen3_attention(x[0].numpy(), np_(att.q_proj.weight), np_(att.k_proj.weight),
                               np_(att.v_proj.weight), np_(att.o_proj.weight), np_(att.q_norm.weight),
                               np_(att.k_norm.weight), 4, 2, theta=10000.0, eps=1e-6)
    assert rel(got, ref[0].numpy()) < 1e-4


def _no_qk_norm(x, wq, wk, wv, wo, q_norm, k_norm, n_head, n_head_kv, theta=10000.0, eps=1e-6):
    from solutions.ch08 import qwen3_attention
    ones = np.ones_like(q_norm)
    big = 1e6                                  # RMSNorm skipped: emulate with a huge eps (no-op scale)
    return qwen3_attention(x, wq, wk, wv, wo, ones * np.sqrt(big), ones * np.sqrt(big), n_head,
                           n_head_kv, theta, big)


WRONG = {"test_ch08_1_swiglu_mlp": {"gate-and-up-swapped": {"swiglu_mlp": lambda x, g, u, d:
             ((x @ u.T) / (1 + np.exp(-(x @ u.T))) * (x @ g.T)) @ d.T}},
         "test_ch08_2_qwen3_attention": {"no-qk-norm": {"qwen3_attention": _no_qk_norm}}}
