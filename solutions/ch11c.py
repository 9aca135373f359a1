"""Chapter 11c (every block format on the GPU): reference solutions."""
import numpy as np

__all__ = ["q4_k_unit", "unit_dot", "fragment_words"]


def q4_k_unit(block, j):
    """Exercise 11c.1 (medium): unit j (0..7) of one 144-byte Q4_K super-block -> (q, a, b): the 32
    codes (integers 0..15) of sub-block j, its scale a = d * sc_j and its minimum b = -dmin * m_j,
    so that its weights are a * q + b. Layout: d, dmin (float16), 12 bytes of 6-bit scales and
    minimums (bytes 0..3: sc 0..3 low 6 bits, high 2 bits of sc 4..7; bytes 4..7: the same for the
    minimums; bytes 8..11: low 4 bits of sc 4..7 and, in the high nibble, of m 4..7), then 128
    bytes of nibbles: sub-blocks 2c and 2c+1 are the low and the high nibbles of bytes 32c..32c+31."""
    b = np.frombuffer(bytes(block), np.uint8)
    d, dmin = b[0:4].view(np.float16).astype(np.float32)
    s = b[4:16].astype(np.int64)
    if j < 4:
        sc, m = s[j] & 63, s[j + 4] & 63
    else:
        sc = (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4)
        m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4)
    chunk = b[16 + 32 * (j // 2):16 + 32 * (j // 2) + 32]
    q = (chunk >> (4 * (j % 2))) & 0x0F
    return q.astype(np.int64), np.float32(d * np.float32(sc)), np.float32(-(dmin * np.float32(m)))


def unit_dot(q, a, b, x):
    """Exercise 11c.2 (medium): the GEMV's arithmetic for one unit: 32 activations x quantized as
    the kernel does (dx = max|x| / 127 in float32, codes xq = x / dx rounded half to even; all zero
    if dx is 0), then dx * (a * sum(q * xq) + b * sum(xq)) with the two sums in integers."""
    x = np.asarray(x, np.float32)
    dx = np.abs(x).max() / np.float32(127)
    xq = np.rint(x / dx).astype(np.int64) if dx > 0 else np.zeros(32, np.int64)
    q = np.asarray(q, np.int64)
    return float(dx) * (float(a) * int((q * xq).sum()) + float(b) * int(xq.sum()))


def fragment_words(t):
    """Exercise 11c.3 (easy): thread t (0..3) of a quad in version 7 (matmul_quant_tma.cu) holds,
    for each of its two weight rows, the A-fragment elements of mma's m16n8k16 layout: in each k16
    slice, columns 2t, 2t+1, 2t+8, 2t+9. Over one unit of 32 weights (two k16 slices) -> (elements,
    words): the 8 elements of the unit it multiplies (sorted), and the code words of the unit it
    must read for them (word k holds elements 4k..4k+3; sorted, no repeats)."""
    elements = sorted(16 * s + 8 * h + 2 * t + i for s in (0, 1) for h in (0, 1) for i in (0, 1))
    return elements, sorted({e // 4 for e in elements})
