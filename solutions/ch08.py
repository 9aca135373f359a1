"""Chapter 08 (Qwen3 end to end): reference solutions, numpy float32."""
import numpy as np

__all__ = ["swiglu_mlp", "qwen3_attention"]


def _rms(x, w, eps):
    return x / np.sqrt(np.mean(x * x, -1, keepdims=True) + eps) * w


def swiglu_mlp(x, w_gate, w_up, w_down):
    """Exercise 08.1 (easy): the MLP of a Qwen3 block, x [T, hidden]; weights as stored by HF
    ([out, in]): down(silu(gate(x)) * up(x)), silu(z) = z * sigmoid(z)."""
    g, u = x @ w_gate.T, x @ w_up.T
    return (g / (1 + np.exp(-g)) * u) @ w_down.T


def qwen3_attention(x, wq, wk, wv, wo, q_norm, k_norm, n_head, n_head_kv, theta=10000.0, eps=1e-6):
    """Exercise 08.2 (hard): the attention half of a Qwen3 block on x [T, hidden] (positions 0..T-1,
    causal, no cache): project q, k, v (HF [out, in] weights), split into heads of head_dim =
    q_norm.size, RMSNorm each q and k head with q_norm / k_norm (Qwen3's qk-norm), apply neox RoPE,
    grouped-query attention, merge the heads and project with wo."""
    T = x.shape[0]
    hd = q_norm.size
    q = _rms((x @ wq.T).reshape(T, n_head, hd), q_norm, eps)
    k = _rms((x @ wk.T).reshape(T, n_head_kv, hd), k_norm, eps)
    v = (x @ wv.T).reshape(T, n_head_kv, hd)
    inv = theta ** (-np.arange(0, hd // 2) * 2 / hd)
    ang = np.arange(T)[:, None] * inv[None]
    cos, sin = np.cos(ang)[:, None], np.sin(ang)[:, None]

    def rope(t):
        a, b = t[..., :hd // 2], t[..., hd // 2:]
        return np.concatenate([a * cos - b * sin, b * cos + a * sin], -1)

    q, k = rope(q), rope(k)
    g = n_head // n_head_kv
    k, v = np.repeat(k, g, 1), np.repeat(v, g, 1)
    s = np.einsum("thd,shd->hts", q, k) / np.sqrt(hd)
    s = np.where(np.tril(np.ones((T, T), bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return np.einsum("hts,shd->thd", p, v).reshape(T, n_head * hd) @ wo.T
