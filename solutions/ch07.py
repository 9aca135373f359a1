"""Chapter 07 (CPU ops): reference solutions, numpy in and out (float32)."""
import numpy as np

__all__ = ["rmsnorm", "rope_neox", "gqa_attention"]


def rmsnorm(x, w, eps=1e-6):
    """Exercise 07.1 (easy): RMSNorm over the last axis: x / sqrt(mean(x²) + eps) * w, computed in
    float32."""
    x = np.asarray(x, np.float32)
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + np.float32(eps)) * w


def rope_neox(x, pos, theta=10000.0):
    """Exercise 07.2 (medium): rotary position embedding, "neox" (rotate-half) style, of
    x [T, n_head, head_dim] at positions pos [T]: pair element i with element i + head_dim/2 and
    rotate the pair by angle pos * theta^(-2i/head_dim)."""
    x = np.asarray(x, np.float32)
    half = x.shape[-1] // 2
    inv = theta ** (-np.arange(0, half, dtype=np.float64) * 2 / x.shape[-1])
    ang = np.asarray(pos, np.float64)[:, None] * inv[None, :]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    a, b = x[..., :half], x[..., half:]
    return np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1).astype(np.float32)


def gqa_attention(q, k, v):
    """Exercise 07.3 (hard): causal grouped-query attention. q [T, Hq, D], k and v [T, Hkv, D] with
    Hq a multiple of Hkv (query head h reads KV head h // (Hq // Hkv)); softmax(q·k / sqrt(D)) over
    the keys at or before each query's position; returns [T, Hq, D]."""
    T, Hq, D = q.shape
    g = Hq // k.shape[1]
    kk, vv = np.repeat(k, g, axis=1), np.repeat(v, g, axis=1)       # [T, Hq, D]
    s = np.einsum("thd,shd->hts", q, kk) / np.sqrt(D)
    s = np.where(np.tril(np.ones((T, T), bool))[None], s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return np.einsum("hts,shd->thd", p, vv).astype(np.float32)
