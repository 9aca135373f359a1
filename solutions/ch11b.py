"""Chapter 11b (the matmul op): reference solutions, numpy models."""
import numpy as np

__all__ = ["pack_q8_act", "gemm16_scratch"]


def pack_q8_act(h):
    """Exercise 11b.1 (medium): the packed int8 activations `rmsnorm_q8` writes and `matmul_q8` reads.
    h: float32 [T, K], K a multiple of 32. Returns uint8 [T, K + K/8]: first the T*K int8 codes, row
    by row, then the T*K/32 float32 scales. Per block of 32 values: d = max|h| / 127 (in float32),
    codes rint(h / d) (0 for a block of zeros, whose d is 0)."""
    h = np.asarray(h, np.float32)
    T, K = h.shape
    blk = h.reshape(T, K // 32, 32)
    d = np.abs(blk).max(-1) / np.float32(127)                               # [T, K/32]
    q = np.rint(blk / np.where(d > 0, d, 1)[..., None]).astype(np.int8)     # [T, K/32, 32]
    # two arrays one after the other: GEMV v3 takes the codes and the scales as two pointers
    return np.concatenate([q.reshape(-1).view(np.uint8), d.reshape(-1).view(np.uint8)]).reshape(T, K + K // 8)


def gemm16_scratch(T, K, N, xk):
    """Exercise 11b.2 (easy): the bytes of each scratch buffer the F16 path takes for T rows of K
    against N weight rows, x of type xk ("F32" or "F16"), in the order it takes them: x cast to fp16
    when it is not fp16 already; then, when K % 8, x and w zero-padded to Kp, the next multiple of
    8 (the tensor cores read a row of fp16 operands in whole 16-byte pieces). Returns a list of ints."""
    pieces = [] if xk == "F16" else [T * K * 2]
    if K % 8:
        Kp = (K + 7) // 8 * 8
        pieces += [T * Kp * 2, N * Kp * 2]
    return pieces
