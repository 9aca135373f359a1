"""Chapter 00 (the tour): your answers.

Write each function, then check it: python -m tffedu.exercises ch00
(the reference answers are in solutions/ch00.py: look once you have tried)
"""
import numpy as np
__all__ = ['softmax', 'greedy_generate']


def softmax(logits):
    """Exercise 00.1 (easy): the probabilities of the next token from one row of logits, as
    float64, without overflow for logits as large as 1e4 (subtract the maximum first)."""
    raise NotImplementedError("ch00: softmax is yours to write")


def greedy_generate(logits_fn, ids, n):
    """Exercise 00.2 (medium): the decode loop. `logits_fn(ids)` gives float logits `[len(ids), vocab]`;
    append the argmax of the last row `n` times and return the new ids only (a list of ints)."""
    raise NotImplementedError("ch00: greedy_generate is yours to write")
