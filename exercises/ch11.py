"""Chapter 11 (the matmul ladder, the Q8_0 GEMV): your answers, numpy models.

Write each function, then check it: python -m tffedu.exercises ch11
(the reference answers are in solutions/ch11.py: look once you have tried)
"""
import numpy as np
from exercises import kernel_file
__all__ = ['tiled_matmul', 'q8_0_gemv', 'gemv_q8_0_kernel']


def tiled_matmul(a, b, tile=16):
    """Exercise 11.1 (medium): C = A @ B computed tile by tile, as a shared-memory kernel does: for
    each (tile x tile) block of C, loop over K in steps of `tile`, multiply the two tiles and
    accumulate in float32. Any M, N, K (the last tiles may be partial)."""
    raise NotImplementedError("ch11: tiled_matmul is yours to write")


def q8_0_gemv(x, raw, n_rows):
    """Exercise 11.2 (hard): y = W @ x for a Q8_0 weight W [n_rows, K] given as its raw blocks
    (uint8, n_rows * K/32 blocks of 34 bytes), without dequantizing W: per block, the int8 codes
    dot the 32 matching x values, times the block's float16 scale; sum the blocks of a row."""
    raise NotImplementedError("ch11: q8_0_gemv is yours to write")


def gemv_q8_0_kernel():
    """Exercise 11.3 (medium, GPU): write the body of `gemv_q8_0_warp_ex` in
    exercises/kernels/gemv_q8_0.cu: a Q8_0 GEMV, one warp per row, its lanes over the row's blocks,
    then a shuffle reduction. Returns the path of your kernel file, which the check compiles and
    runs on the GPU (against gguf-py's dequantization)."""
    return kernel_file("gemv_q8_0.cu", "ch11")
