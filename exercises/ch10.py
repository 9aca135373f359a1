"""Chapter 10 (PyCUDA and the small kernels): your answers, numpy models of what a kernel
does, so they run without a GPU.

Write each function, then check it: python -m tffedu.exercises ch10
(the reference answers are in solutions/ch10.py: look once you have tried)
"""
import numpy as np
from exercises import kernel_file
__all__ = ['launch_config', 'warp_reduce_sum', 'silu_mul_kernel']


def launch_config(n, block=256, max_grid=2 ** 31 - 1):
    """Exercise 10.1 (easy): (grid, block) for an elementwise kernel over n elements, one thread per
    element: the fewest blocks that cover n. A ValueError when n needs more than max_grid blocks."""
    raise NotImplementedError("ch10: launch_config is yours to write")


def warp_reduce_sum(lanes):
    """Exercise 10.2 (medium): what `__shfl_xor_sync` does in a warp sum (the butterfly our kernels
    use), on 32 float32 lane values: for offset 16, 8, 4, 2, 1 every lane i adds the value lane
    i ^ offset held before the step. Return the 32 lanes' values after the last step (float32):
    every lane then holds the sum, so no broadcast is needed after it."""
    raise NotImplementedError("ch10: warp_reduce_sum is yours to write")


def silu_mul_kernel():
    """Exercise 10.3 (medium, GPU): write the body of `silu_mul` in exercises/kernels/silu_mul.cu: out =
    silu(gate) * up with a grid-stride loop. Returns the path of your kernel file, which the check
    compiles and runs on the GPU (against numpy)."""
    return kernel_file("silu_mul.cu", "ch10")
