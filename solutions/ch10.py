"""Chapter 10 (PyCUDA and the small kernels): reference solutions, numpy models of what a kernel
does, so they run without a GPU."""
import numpy as np

__all__ = ["launch_config", "warp_reduce_sum"]


def launch_config(n, block=256, max_grid=2**31 - 1):
    """Exercise 10.1 (easy): (grid, block) for an elementwise kernel over n elements, one thread per
    element: the fewest blocks that cover n. A ValueError when n needs more than max_grid blocks."""
    grid = -(-n // block)
    if grid > max_grid:
        raise ValueError(f"{n} elements need {grid} blocks of {block}, more than {max_grid}")
    return max(grid, 1), block


def warp_reduce_sum(lanes):
    """Exercise 10.2 (medium): what `__shfl_down_sync` does in a warp sum, on 32 float32 lane values:
    for offset 16, 8, 4, 2, 1 every lane i adds the value of lane i + offset (lanes past 31 add
    nothing); return lane 0's value, as float32."""
    v = np.asarray(lanes, np.float32).copy()
    off = 16
    while off:
        shifted = np.zeros_like(v)
        shifted[:32 - off] = v[off:]
        v = (v + shifted).astype(np.float32)
        off //= 2
    return np.float32(v[0])
