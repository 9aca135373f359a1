"""Chapter 13 (the GPU runtime): your answers.

Write each function, then check it: python -m tffedu.exercises ch13
(the reference answers are in solutions/ch13.py: look once you have tried)
"""
from dataclasses import replace
__all__ = ['step_input_bytes', 'padding', 'fuse_qk_norm_rope', 'planar_index']


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


def fuse_qk_norm_rope(n, users):
    """Exercise 13.3 (hard): the lowering rule of section 3, for chapter 05's `fuse`. Given a node
    `n` and `users` (node -> the op nodes that read it), return the fused node when `n` is a
    `rope` whose input is a per-head `rmsnorm` (3-D, with a weight) that nothing else reads: a copy
    of `n` with op 'qk_norm_rope', inputs (x, w, pos) and attrs {'eps': the norm's eps (default
    1e-6), **the rope's attrs}. Else None."""
    raise NotImplementedError("ch13: fuse_qk_norm_rope is yours to write")


def planar_index(t, n, T, Ns):
    """Exercise 13.4 (medium): where `matmul_cat` puts element (t, n) of the products laid side by
    side, x @ [w0; w1; ...].T (T rows, sum(Ns) columns): its output is planar, each product's
    [T, Ns[i]] block after the previous one. Return the flat index (an int); an IndexError
    outside the T x sum(Ns) products."""
    raise NotImplementedError("ch13: planar_index is yours to write")
