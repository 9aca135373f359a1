"""Chapter 08a (Llama): your answers.

Write each function, then check it: python -m tffedu.exercises ch08a
(the reference answers are in solutions/ch08a.py: look once you have tried)
"""
import numpy as np
__all__ = ['llama3_inv_freq', 'permute_qk']


def llama3_inv_freq(head_dim, theta, factor, low_freq_factor, high_freq_factor, original_context):
    """Exercise 08a.1 (medium): Llama 3's RoPE frequency scaling. Start from inv_freq_i =
    theta^(-2i/head_dim); with wavelength w = 2π / inv_freq: keep frequencies whose w is shorter
    than original_context / high_freq_factor, divide those with w longer than
    original_context / low_freq_factor by `factor`, and blend in between with
    s = (original_context / w - low_freq_factor) / (high_freq_factor - low_freq_factor):
    (1 - s) * inv_freq / factor + s * inv_freq."""
    raise NotImplementedError("ch08a: llama3_inv_freq is yours to write")


def permute_qk(w, n_head):
    """Exercise 08a.2 (medium): llama.cpp's row permutation of a Q or K weight [n_head * head_dim,
    hidden], so that RoPE on adjacent pairs (2i, 2i+1) of the permuted projection equals HF's
    rotate-half RoPE on pairs (i, i + head_dim/2) of the original: within each head, row i of the
    first half goes to row 2i, row i of the second half to row 2i + 1."""
    raise NotImplementedError("ch08a: permute_qk is yours to write")
