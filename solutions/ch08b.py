"""Chapter 08b (tffedu.load, generate): reference solutions, numpy float32/float64."""
import numpy as np

__all__ = ["top_k_logprobs", "perplexity"]


def top_k_logprobs(logits, k):
    """Exercise 08b.1 (easy): the k most likely next tokens of one row of logits and their
    log-probabilities: (ids, logprobs), most likely first."""
    z = np.asarray(logits, np.float64)
    lp = z - z.max() - np.log(np.exp(z - z.max()).sum())
    ids = np.argsort(-lp, kind="stable")[:k]
    return ids, lp[ids]


def perplexity(logits, ids):
    """Exercise 08b.2 (medium): the perplexity of a text under the model: `logits` [T, V] of a
    prefill over `ids` [T]; row t predicts ids[t + 1]. exp of the mean negative log-likelihood of
    ids[1:]."""
    z = np.asarray(logits, np.float64)[:-1]
    m = z.max(-1, keepdims=True)
    lse = (m + np.log(np.exp(z - m).sum(-1, keepdims=True)))[:, 0]
    nll = lse - z[np.arange(len(z)), np.asarray(ids)[1:]]
    return float(np.exp(nll.mean()))
