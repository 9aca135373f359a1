"""Chapter 12 (attention on the GPU): your answers, numpy models of the tiled kernels.

Write each function, then check it: python -m tffedu.exercises ch12
(the reference answers are in solutions/ch12.py: look once you have tried)
"""
import numpy as np
from exercises import kernel_file
__all__ = ['merge_softmax_stats', 'flash_attention', 'softmax_rows_kernel']


def merge_softmax_stats(m1, l1, m2, l2):
    """Exercise 12.1 (easy): online softmax. (m, l) summarizes a block of scores: m its maximum,
    l = sum(exp(s - m)). Return (m, l) of the two blocks together without seeing the scores."""
    raise NotImplementedError("ch12: merge_softmax_stats is yours to write")


def flash_attention(q, k, v, block_q=16, block_k=16, causal=True):
    """Exercise 12.2 (hard): attention of q [T, D] over k, v [S, D] (one head, scale 1/sqrt(D);
    causal: query t sees keys <= t + S - T) computed block by block with the online softmax — never
    the whole [T, S] score matrix: for each block of queries keep a running max, sum and output,
    rescaled at every block of keys."""
    raise NotImplementedError("ch12: flash_attention is yours to write")


def softmax_rows_kernel():
    """Exercise 12.3 (medium, GPU): finish `softmax_rows_ex` in exercises/kernels/softmax_rows.cu: merge
    the lanes' online-softmax (max, sum) pairs with shuffles, then write the row's softmax. Returns
    the path of your kernel file, which the check compiles and runs on the GPU (against numpy, on
    rows up to 1e4 in size)."""
    return kernel_file("softmax_rows.cu", "ch12")
