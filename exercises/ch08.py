"""Chapter 08 (Qwen3 end to end): your answers, numpy float32.

Write each function, then check it: python -m tffedu.exercises ch08
(the reference answers are in solutions/ch08.py: look once you have tried)
"""
import numpy as np
__all__ = ['swiglu_mlp', 'qwen3_attention']


def swiglu_mlp(x, w_gate, w_up, w_down):
    """Exercise 08.1 (easy): the MLP of a Qwen3 block, x [T, hidden]; weights as stored by HF
    ([out, in]): down(silu(gate(x)) * up(x)), silu(z) = z * sigmoid(z)."""
    raise NotImplementedError("ch08: swiglu_mlp is yours to write")


def qwen3_attention(x, wq, wk, wv, wo, q_norm, k_norm, n_head, n_head_kv, theta=10000.0, eps=1e-06):
    """Exercise 08.2 (hard): the attention half of a Qwen3 block on x [T, hidden] (positions 0..T-1,
    causal, no cache): project q, k, v (HF [out, in] weights), split into heads of head_dim =
    q_norm.size, RMSNorm each q and k head with q_norm / k_norm (Qwen3's qk-norm), apply neox RoPE,
    grouped-query attention, merge the heads and project with wo."""
    raise NotImplementedError("ch08: qwen3_attention is yours to write")
