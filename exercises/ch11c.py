"""Chapter 11c (every block format on the GPU): your answers.

Write each function, then check it: python -m tffedu.exercises ch11c
(the reference answers are in solutions/ch11c.py: look once you have tried)
"""
import numpy as np
__all__ = ['q4_k_unit', 'unit_dot', 'fragment_words', 'q6_kp_lane']


def q4_k_unit(block, j):
    """Exercise 11c.1 (medium): unit j (0..7) of one 144-byte Q4_K super-block -> (q, a, b): the 32
    codes (integers 0..15) of sub-block j, its scale a = d * sc_j and its minimum b = -dmin * m_j,
    so that its weights are a * q + b. Layout: d, dmin (float16), 12 bytes of 6-bit scales and
    minimums (bytes 0..3: sc 0..3 low 6 bits, high 2 bits of sc 4..7; bytes 4..7: the same for the
    minimums; bytes 8..11: low 4 bits of sc 4..7 and, in the high nibble, of m 4..7), then 128
    bytes of nibbles: sub-blocks 2c and 2c+1 are the low and the high nibbles of bytes 32c..32c+31."""
    raise NotImplementedError("ch11c: q4_k_unit is yours to write")


def unit_dot(q, a, b, x):
    """Exercise 11c.2 (medium): the GEMV's arithmetic for one unit: 32 activations x quantized as
    the kernel does (dx = max|x| / 127 in float32, codes xq = x / dx rounded half to even; all zero
    if dx is 0), then dx * (a * sum(q * xq) + b * sum(xq)) with the two sums in integers."""
    raise NotImplementedError("ch11c: unit_dot is yours to write")


def fragment_words(t):
    """Exercise 11c.3 (easy): thread t (0..3) of a quad in version 7 (matmul_quant_tma.cu) holds,
    for each of its two weight rows, the A-fragment elements of mma's m16n8k16 layout: in each k16
    slice, columns 2t, 2t+1, 2t+8, 2t+9. Over one unit of 32 weights (two k16 slices) -> (elements,
    words): the 8 elements of the unit it multiplies (sorted), and the code words of the unit it
    must read for them (word k holds elements 4k..4k+3; sorted, no repeats)."""
    raise NotImplementedError("ch11c: fragment_words is yours to write")


def q6_kp_lane(block, c16):
    """Exercise 11c.4 (medium): lane c16 (0..7) of the eight that share one padded Q6_K super-block
    (216 bytes: ql 128, qh 64, 16 int8 scales, d float16, 6 bytes of padding) on the direct road ->
    (elements, values): the 32 element indices (0..255, in the order the lane decodes them) and their
    weights. The lane reads ql bytes 16 c16 .. 16 c16 + 15: their low nibbles are elements l0 .. l0 + 15
    of unit ja = 4 h + a, their high nibbles the same elements of unit ja + 2 (h = c16 // 4, a = c16 // 2
    % 2, l0 = 16 (c16 % 2)). Element l of unit j of half h takes its high 2 bits from qh[32 h + l] at
    bit 2 (j % 4), its scale from byte 2 j + l // 16 of the scales; w = d * scale * (code - 32)."""
    raise NotImplementedError("ch11c: q6_kp_lane is yours to write")
