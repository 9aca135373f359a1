"""Chapter 10 (PyCUDA and the small kernels): reference solutions, numpy models of what a kernel
does, so they run without a GPU."""
import numpy as np

from solutions import kernel_file

__all__ = ["launch_config", "warp_reduce_sum", "silu_mul_kernel"]


def launch_config(n, block=256, max_grid=2**31 - 1):
    """Exercise 10.1 (easy): (grid, block) for an elementwise kernel over n elements, one thread per
    element: the fewest blocks that cover n. A ValueError when n needs more than max_grid blocks."""
    grid = -(-n // block)
    if grid > max_grid:
        raise ValueError(f"{n} elements need {grid} blocks of {block}, more than {max_grid}")
    return max(grid, 1), block


def warp_reduce_sum(lanes):
    """Exercise 10.2 (medium): what `__shfl_xor_sync` does in a warp sum (the butterfly our kernels
    use), on 32 float32 lane values: for offset 16, 8, 4, 2, 1 every lane i adds the value lane
    i ^ offset held before the step. Return the 32 lanes' values after the last step (float32):
    every lane then holds the sum, so no broadcast is needed after it."""
    v = np.asarray(lanes, np.float32).copy()
    lane = np.arange(32)
    for off in (16, 8, 4, 2, 1):
        v = (v + v[lane ^ off]).astype(np.float32)
    return v


def silu_mul_kernel():
    """Exercise 10.3 (medium, GPU): write the body of `silu_mul` in exercises/kernels/silu_mul.cu: out =
    silu(gate) * up with a grid-stride loop. Returns the path of your kernel file, which the check
    compiles and runs on the GPU (against numpy)."""
    return kernel_file("silu_mul.cu")
