"""Chapter 11b (the matmul op): your answers, numpy models.

Write each function, then check it: python -m tffedu.exercises ch11b
(the reference answers are in solutions/ch11b.py: look once you have tried)
"""
import numpy as np
__all__ = ['pack_q8_act', 'gemm16_scratch']


def pack_q8_act(h):
    """Exercise 11b.1 (medium): the packed int8 activations `rmsnorm_q8` writes and `matmul_q8` reads.
    h: float32 [T, K], K a multiple of 32. Returns uint8 [T, K + K/8]: first the T*K int8 codes, row
    by row, then the T*K/32 float32 scales. Per block of 32 values: d = max|h| / 127 (in float32),
    codes rint(h / d) (0 for a block of zeros, whose d is 0)."""
    raise NotImplementedError("ch11b: pack_q8_act is yours to write")


def gemm16_scratch(T, K, N, xk):
    """Exercise 11b.2 (easy): the bytes of each scratch buffer the F16 path takes for T rows of K
    against N weight rows, x of type xk ("F32" or "F16"), in the order it takes them: x cast to fp16
    when it is not fp16 already; then, when K % 8, x and w zero-padded to Kp, the next multiple of
    8 (the tensor cores read a row of fp16 operands in whole 16-byte pieces). Returns a list of ints."""
    raise NotImplementedError("ch11b: gemm16_scratch is yours to write")
