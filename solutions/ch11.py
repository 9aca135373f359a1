"""Chapter 11 (the matmul ladder, the Q8_0 GEMV): reference solutions, numpy models."""
import numpy as np

__all__ = ["tiled_matmul", "q8_0_gemv", "dequant_bias_trick", "tma_weight_box"]


def tiled_matmul(a, b, tile=16):
    """Exercise 11.1 (medium): C = A @ B computed tile by tile, as a shared-memory kernel does: for
    each (tile x tile) block of C, loop over K in steps of `tile`, multiply the two tiles and
    accumulate in float32. Any M, N, K (the last tiles may be partial)."""
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    M, K = a.shape
    N = b.shape[1]
    c = np.zeros((M, N), np.float32)
    for i in range(0, M, tile):
        for j in range(0, N, tile):
            acc = np.zeros((min(tile, M - i), min(tile, N - j)), np.float32)
            for k in range(0, K, tile):
                acc += a[i:i + tile, k:k + tile] @ b[k:k + tile, j:j + tile]
            c[i:i + tile, j:j + tile] = acc
    return c


def q8_0_gemv(x, raw, n_rows):
    """Exercise 11.2 (hard): y = W @ x for a Q8_0 weight W [n_rows, K] given as its raw blocks
    (uint8, n_rows * K/32 blocks of 34 bytes), without dequantizing W: per block, the int8 codes
    dot the 32 matching x values, times the block's float16 scale; sum the blocks of a row."""
    x = np.asarray(x, np.float32)
    K = x.shape[0]
    b = np.asarray(raw, np.uint8).reshape(n_rows, K // 32, 34)
    d = b[..., :2].copy().view(np.float16)[..., 0].astype(np.float32)       # [N, K/32]
    q = b[..., 2:].copy().view(np.int8).astype(np.float32)                  # [N, K/32, 32]
    return (d * np.einsum("nbk,bk->nb", q, x.reshape(-1, 32))).sum(-1)


def dequant_bias_trick(q, d):
    """Exercise 11.3 (medium): version 6's dequantization without any int-to-float conversion.
    q: int8 quants [..., n]; d: float16 scales broadcastable to q. Bias each quant to a byte
    (q ^ 0x80 = q + 128), put the byte under the exponent of 1024.0 (float16 bits 0x6400 | byte =
    1024 + byte), subtract 1152 in float16 (exactly q), multiply by d in float16. Returns float16
    weights equal, bit for bit, to float16(float32(d) * q)."""
    byte = np.asarray(q, np.int8).view(np.uint8) ^ np.uint8(0x80)
    h = (np.uint16(0x6400) | byte.astype(np.uint16)).view(np.float16)
    return (h - np.float16(1152)) * np.asarray(d, np.float16)


def tma_weight_box(kt):
    """Exercise 11.4 (easy): version 7's TMA box for 64-k tile `kt` of a Q8_0 weight row. The tile's
    two blocks are the 68 bytes at byte 68 kt; TMA starts a box only at a 16-byte aligned byte, and
    the box is 80 bytes wide. Return (start, offset): the box's first byte (a multiple of 16, at or
    before the tile, the box reaching the tile's last byte) and where the tile begins inside it."""
    start = 68 * kt // 16 * 16            # rounded down: 4 (kt % 4) bytes early, and 80 - 12 = 68 still reach the end
    return start, 68 * kt - start
