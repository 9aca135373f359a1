"""Chapter 08d (Qwen3-MoE): reference solutions."""
import numpy as np

__all__ = ["route", "active_parameters"]


def route(logits, k, norm):
    """Exercise 08d.1 (easy): each token's k experts and their weights from the router's logits
    [T, E]: the softmax over the experts, the k largest probabilities (largest first) and their
    indices; with `norm` the k weights are divided by their sum. Returns (indices [T, k], weights [T, k])."""
    x = np.asarray(logits, np.float64)
    p = np.exp(x - x.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    idx = np.argsort(-p, axis=-1, kind="stable")[:, :k]
    w = np.take_along_axis(p, idx, -1)
    return idx, (w / w.sum(-1, keepdims=True) if norm else w)


def active_parameters(n_layer, hidden, n_head, n_head_kv, head_dim, n_expert, n_expert_used, expert_ffn, vocab):
    """Exercise 08d.2 (medium): the parameters one decode token reads in a Qwen3-MoE model (untied):
    per layer the q, k, v, o projections, the q/k norms and two RMSNorms, the router [E, hidden] and
    the gate, up and down of its `n_expert_used` experts; one row of the embedding; the final norm and
    the output head [vocab, hidden]."""
    attn = hidden * n_head * head_dim * 2 + hidden * n_head_kv * head_dim * 2 + 2 * head_dim + 2 * hidden
    layer = attn + n_expert * hidden + n_expert_used * 3 * hidden * expert_ffn
    return n_layer * layer + hidden + hidden + vocab * hidden
