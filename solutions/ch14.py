"""Chapter 14 (sampling): reference solutions, numpy on one row of logits (float32 in, float32 out;
filtered tokens get -inf)."""
import numpy as np

__all__ = ["top_k_filter", "top_p_filter", "repetition_penalty"]


def top_k_filter(logits, k):
    """Exercise 14.1 (easy): keep the k largest logits (and any tied with the k-th), -inf elsewhere."""
    z = np.asarray(logits, np.float32).copy()
    kth = np.sort(z)[-min(k, z.size)]
    z[z < kth] = -np.inf
    return z


def top_p_filter(logits, p, min_keep=1):
    """Exercise 14.2 (medium): nucleus filtering, as HF does it: sort ascending, drop the tokens whose
    cumulative probability is <= 1 - p (always keeping the `min_keep` most likely), -inf for them."""
    z = np.asarray(logits, np.float32).copy()
    order = np.argsort(z, kind="stable")
    e = np.exp(z[order] - z.max())
    cum = np.cumsum(e / e.sum())
    drop = cum <= 1 - p
    drop[-min_keep:] = False
    z[order[drop]] = -np.inf
    return z


def repetition_penalty(logits, ids, penalty):
    """Exercise 14.3 (medium): CTRL's repetition penalty, as HF applies it: for every token already
    in `ids`, divide its logit by `penalty` if positive, multiply if negative."""
    z = np.asarray(logits, np.float32).copy()
    u = np.unique(np.asarray(ids))
    z[u] = np.where(z[u] > 0, z[u] / penalty, z[u] * penalty)
    return z
