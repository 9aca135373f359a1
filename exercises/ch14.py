"""Chapter 14 (sampling): your answers, numpy on one row of logits (float32 in, float32 out;
filtered tokens get -inf).

Write each function, then check it: python -m tffedu.exercises ch14
(the reference answers are in solutions/ch14.py: look once you have tried)
"""
import numpy as np
__all__ = ['top_k_filter', 'top_p_filter', 'repetition_penalty']


def top_k_filter(logits, k):
    """Exercise 14.1 (easy): keep the k largest logits (and any tied with the k-th), -inf elsewhere."""
    raise NotImplementedError("ch14: top_k_filter is yours to write")


def top_p_filter(logits, p, min_keep=1):
    """Exercise 14.2 (medium): nucleus filtering, as HF does it: sort ascending, drop the tokens whose
    cumulative probability is <= 1 - p (always keeping the `min_keep` most likely), -inf for them."""
    raise NotImplementedError("ch14: top_p_filter is yours to write")


def repetition_penalty(logits, ids, penalty):
    """Exercise 14.3 (medium): CTRL's repetition penalty, as HF applies it: for every token already
    in `ids`, divide its logit by `penalty` if positive, multiply if negative."""
    raise NotImplementedError("ch14: repetition_penalty is yours to write")
