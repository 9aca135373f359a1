"""Chapter 07 (CPU ops): your answers, numpy in and out (float32).

Write each function, then check it: python -m tffedu.exercises ch07
(the reference answers are in solutions/ch07.py: look once you have tried)
"""
import numpy as np
__all__ = ['rmsnorm', 'rope_neox', 'gqa_attention']


def rmsnorm(x, w, eps=1e-06):
    """Exercise 07.1 (easy): RMSNorm over the last axis: x / sqrt(mean(x²) + eps) * w, computed in
    float32."""
    raise NotImplementedError("ch07: rmsnorm is yours to write")


def rope_neox(x, pos, theta=10000.0):
    """Exercise 07.2 (medium): rotary position embedding, "neox" (rotate-half) style, of
    x [T, n_head, head_dim] at positions pos [T]: pair element i with element i + head_dim/2 and
    rotate the pair by angle pos * theta^(-2i/head_dim)."""
    raise NotImplementedError("ch07: rope_neox is yours to write")


def gqa_attention(q, k, v):
    """Exercise 07.3 (hard): causal grouped-query attention. q [T, Hq, D], k and v [T, Hkv, D] with
    Hq a multiple of Hkv (query head h reads KV head h // (Hq // Hkv)); softmax(q·k / sqrt(D)) over
    the keys at or before each query's position; returns [T, Hq, D]."""
    raise NotImplementedError("ch07: gqa_attention is yours to write")
