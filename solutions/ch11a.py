"""Chapter 11a (Q8_0 weights on the tensor cores): reference solutions, numpy models."""
import numpy as np

__all__ = ["dequant_bias_trick", "tma_weight_box"]


def dequant_bias_trick(q, d):
    """Exercise 11a.1 (medium): version 6's dequantization without any int-to-float conversion.
    q: int8 quants [..., n]; d: float16 scales broadcastable to q. Bias each quant to a byte
    (q ^ 0x80 = q + 128), put the byte under the exponent of 1024.0 (float16 bits 0x6400 | byte =
    1024 + byte), subtract 1152 in float16 (exactly q), multiply by d in float16. Returns float16
    weights equal, bit for bit, to float16(float32(d) * q)."""
    byte = np.asarray(q, np.int8).view(np.uint8) ^ np.uint8(0x80)
    h = (np.uint16(0x6400) | byte.astype(np.uint16)).view(np.float16)
    return (h - np.float16(1152)) * np.asarray(d, np.float16)


def tma_weight_box(kt):
    """Exercise 11a.2 (easy): version 7's TMA box for 64-k tile `kt` of a Q8_0 weight row. The tile's
    two blocks are the 68 bytes at byte 68 kt; TMA starts a box only at a 16-byte aligned byte, and
    the box is 80 bytes wide. Return (start, offset): the box's first byte (a multiple of 16, at or
    before the tile, the box reaching the tile's last byte) and where the tile begins inside it."""
    start = 68 * kt // 16 * 16            # rounded down: 4 (kt % 4) bytes early, and 80 - 12 = 68 still reach the end
    return start, 68 * kt - start
