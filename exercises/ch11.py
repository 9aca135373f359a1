"""Chapter 11 (the matmul ladder, the Q8_0 GEMV): your answers, numpy models.

Write each function, then check it: python -m tffedu.exercises ch11
(the reference answers are in solutions/ch11.py: look once you have tried)
"""
import numpy as np
__all__ = ['tiled_matmul', 'q8_0_gemv', 'dequant_bias_trick', 'tma_weight_box']


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


def dequant_bias_trick(q, d):
    """Exercise 11.3 (medium): version 6's dequantization without any int-to-float conversion.
    q: int8 quants [..., n]; d: float16 scales broadcastable to q. Bias each quant to a byte
    (q ^ 0x80 = q + 128), put the byte under the exponent of 1024.0 (float16 bits 0x6400 | byte =
    1024 + byte), subtract 1152 in float16 (exactly q), multiply by d in float16. Returns float16
    weights equal, bit for bit, to float16(float32(d) * q)."""
    raise NotImplementedError("ch11: dequant_bias_trick is yours to write")


def tma_weight_box(kt):
    """Exercise 11.4 (easy): version 7's TMA box for 64-k tile `kt` of a Q8_0 weight row. The tile's
    two blocks are the 68 bytes at byte 68 kt; TMA starts a box only at a 16-byte aligned byte, and
    the box is 80 bytes wide. Return (start, offset): the box's first byte (a multiple of 16, at or
    before the tile, the box reaching the tile's last byte) and where the tile begins inside it."""
    raise NotImplementedError("ch11: tma_weight_box is yours to write")
