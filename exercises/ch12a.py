"""Chapter 12a (flash attention on Hopper): your answers, numpy models.

Write each function, then check it: python -m tffedu.exercises ch12a
(the reference answers are in solutions/ch12a.py: look once you have tried)
"""
import numpy as np
__all__ = ['transpose_by_blocks', 'swizzle_128b']


def transpose_by_blocks(v):
    """Exercise 12a.1 (easy): V transposed the way version 4's producer does it: v [keys, dim], both
    multiples of 8, cut into 8 x 8 blocks; each block is transposed (ldmatrix.trans) and written
    where its mirror block goes in the [dim, keys] result (stmatrix). Returns the [dim, keys] array."""
    raise NotImplementedError("ch12a: transpose_by_blocks is yours to write")


def swizzle_128b(row, chunk):
    """Exercise 12a.2 (medium): TMA's 128-byte swizzle. A row of a tile in shared memory is 128 bytes,
    eight 16-byte chunks. Returns the physical chunk (0..7) where logical chunk `chunk` of row `row`
    lands: the chunk index XOR the row's position within its group of 8 rows."""
    raise NotImplementedError("ch12a: swizzle_128b is yours to write")
