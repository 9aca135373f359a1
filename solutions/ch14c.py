"""Chapter 14c (8-bit K/V pages on the GPU): reference solutions, numpy models."""
import numpy as np

__all__ = ["kv_bytes_per_token", "lane_offsets"]


def kv_bytes_per_token(n_layer, n_kv_heads, head_dim, kv_dtype):
    """Exercise 14c.1 (easy): the bytes one token's keys and values take in the pages of every layer,
    for kv_dtype "F16" (2 bytes a value) or "Q8_0" (34 bytes a block of 32 values along a head's row)."""
    row = {"F16": 2 * head_dim, "Q8_0": head_dim // 32 * 34}[kv_dtype]
    return 2 * n_layer * n_kv_heads * row


def lane_offsets(d0, head_dim):
    """Exercise 14c.2 (medium): where a decode lane's bytes are in one Q8_0 row of `head_dim` values (head_dim / 32
    blocks of 34 bytes: an f16 scale, then 32 int8 codes). The lane holds values d0 .. d0 + 7 (d0 a multiple of
    8): return (the offset of their block's scale, [the offsets of their 8 codes]), in bytes from the row's start."""
    block = d0 // 32 * 34                               # load_q8's `row + d0 / 32 * 34`
    return block, [block + 2 + d0 % 32 + i for i in range(8)]
