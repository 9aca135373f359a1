"""Chapter 13 (the GPU runtime): your answers.

Write each function, then check it: python -m tffedu.exercises ch13
(the reference answers are in solutions/ch13.py: look once you have tried)
"""
from exercises import kernel_file
__all__ = ['step_input_bytes', 'padding', 'kv_store_kernel']


def step_input_bytes(B, max_pages, align=256):
    """Exercise 13.1 (easy): the bytes one decode step of B sequences copies to the device: the
    inputs of the runner's graph, int32 each — ids, pos, slots and last [B], page_tables
    [B, max_pages], seq_lens [B], cu_seqlens [B + 1] — each rounded up to `align` bytes, the way
    the executor packs them at the start of its memory block."""
    raise NotImplementedError("ch13: step_input_bytes is yours to write")


def padding(sizes, buckets):
    """Exercise 13.2 (medium): a trace of step sizes (tokens or sequences per step) runs each step
    in the smallest bucket >= its size; return the total padded rows (bucket - size, summed).
    A ValueError when a size fits no bucket."""
    raise NotImplementedError("ch13: padding is yours to write")


def kv_store_kernel():
    """Exercise 13.3 (easy, GPU): write `kv_store_ex` in exercises/kernels/kv_store.cu: each token's K row
    into its slot of the paged cache, padding slots (-1) skipped. Returns the path of your kernel
    file, which the check compiles and runs on the GPU (against numpy)."""
    return kernel_file("kv_store.cu", "ch13")
