"""Chapter 11 (the matmul ladder, the Q8_0 GEMV): reference solutions, numpy models."""
import numpy as np

from solutions import kernel_file

__all__ = ["tiled_matmul", "q8_0_gemv", "gemv_q8_0_kernel"]


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


def gemv_q8_0_kernel():
    """Exercise 11.3 (medium, GPU): write the body of `gemv_q8_0_warp_ex` in
    exercises/kernels/gemv_q8_0.cu: a Q8_0 GEMV, one warp per row, its lanes over the row's blocks,
    then a shuffle reduction. Returns the path of your kernel file, which the check compiles and
    runs on the GPU (against gguf-py's dequantization)."""
    return kernel_file("gemv_q8_0.cu")
