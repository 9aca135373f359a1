"""Chapter 17 (tensor parallelism): your answers.

Write each function, then check it: python -m tffedu.exercises ch17
(the reference answers are in solutions/ch17.py: look once you have tried)
"""
import numpy as np
__all__ = ['split_ffn', 'kv_heads_of']


def split_ffn(x, w_gate, w_up, w_down, ranks: int) -> list:
    """Exercise 17.1 (easy): SwiGLU's feed-forward, silu(x @ w_gate.T) * (x @ w_up.T) @ w_down.T, as
    `ranks` ranks compute it: rank r takes rows [r F/R, (r+1) F/R) of w_gate and w_up and the same
    columns of w_down (F = w_gate.shape[0], a multiple of ranks). Return the list of the ranks'
    partial outputs, each of the whole output's shape [T, D]; silu(z) = z / (1 + exp(-z))."""
    raise NotImplementedError("ch17: split_ffn is yours to write")


def kv_heads_of(n_head: int, n_head_kv: int, ranks: int, rank: int) -> range:
    """Exercise 17.2 (medium): the K/V heads rank `rank` of `ranks` keeps, as range(start, end). When
    ranks divide n_head_kv: an equal share in order. When n_head_kv divides ranks (fewer K/V heads
    than ranks): the one K/V head the rank's query heads read (query head h reads K/V head
    h // (n_head // n_head_kv); the rank's query heads are its equal share of n_head, in order).
    Anything else, or n_head not a multiple of ranks: ValueError."""
    raise NotImplementedError("ch17: kv_heads_of is yours to write")
