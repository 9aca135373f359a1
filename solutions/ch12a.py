"""Chapter 12a (flash attention on Hopper): reference solutions, numpy models."""
import numpy as np

__all__ = ["transpose_by_blocks", "swizzle_128b"]


def transpose_by_blocks(v):
    """Exercise 12a.1 (easy): V transposed the way version 4's producer does it: v [keys, dim], both
    multiples of 8, cut into 8 x 8 blocks; each block is transposed (ldmatrix.trans) and written
    where its mirror block goes in the [dim, keys] result (stmatrix). Returns the [dim, keys] array."""
    v = np.asarray(v)
    keys, dim = v.shape
    out = np.empty((dim, keys), v.dtype)
    for i in range(0, keys, 8):
        for j in range(0, dim, 8):
            out[j:j + 8, i:i + 8] = v[i:i + 8, j:j + 8].T      # block (i, j) -> block (j, i), transposed
    return out


def swizzle_128b(row, chunk):
    """Exercise 12a.2 (medium): TMA's 128-byte swizzle. A row of a tile in shared memory is 128 bytes,
    eight 16-byte chunks. Returns the physical chunk (0..7) where logical chunk `chunk` of row `row`
    lands: the chunk index XOR the row's position within its group of 8 rows."""
    return chunk ^ (row % 8)
