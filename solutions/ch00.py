"""Chapter 00 (the tour): reference solutions."""
import numpy as np

__all__ = ["softmax", "greedy_generate"]


def softmax(logits):
    """Exercise 00.1 (easy): the probabilities of the next token from one row of logits, as
    float64, without overflow for logits as large as 1e4 (subtract the maximum first)."""
    z = np.asarray(logits, dtype=np.float64)
    e = np.exp(z - z.max())
    return e / e.sum()


def greedy_generate(logits_fn, ids, n):
    """Exercise 00.2 (medium): the decode loop. `logits_fn(ids)` gives float logits `[len(ids), vocab]`;
    append the argmax of the last row `n` times and return the new ids only (a list of ints)."""
    ids, new = list(ids), []
    for _ in range(n):
        nxt = int(np.argmax(logits_fn(ids)[-1]))
        ids.append(nxt)
        new.append(nxt)
    return new
