"""Chapter 08b (tffedu.load, generate): your answers, numpy float32/float64.

Write each function, then check it: python -m tffedu.exercises ch08b
(the reference answers are in solutions/ch08b.py: look once you have tried)
"""
import numpy as np
__all__ = ['top_k_logprobs', 'perplexity']


def top_k_logprobs(logits, k):
    """Exercise 08b.1 (easy): the k most likely next tokens of one row of logits and their
    log-probabilities: (ids, logprobs), most likely first."""
    raise NotImplementedError("ch08b: top_k_logprobs is yours to write")


def perplexity(logits, ids):
    """Exercise 08b.2 (medium): the perplexity of a text under the model: `logits` [T, V] of a
    prefill over `ids` [T]; row t predicts ids[t + 1]. exp of the mean negative log-likelihood of
    ids[1:]."""
    raise NotImplementedError("ch08b: perplexity is yours to write")
