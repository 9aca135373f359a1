"""Chapter 12b (lowering): your answers.

Write each function, then check it: python -m tffedu.exercises ch12b
(the reference answers are in solutions/ch12b.py: look once you have tried)
"""
from dataclasses import replace
__all__ = ['fuse_qk_norm_rope', 'planar_index']


def fuse_qk_norm_rope(n, users):
    """Exercise 12b.1 (hard): the lowering rule of section 2, for chapter 05's `fuse`. Given a node
    `n` and `users` (node -> the op nodes that read it), return the fused node when `n` is a
    `rope` whose input is a per-head `rmsnorm` (3-D, with a weight) that nothing else reads: a copy
    of `n` with op 'qk_norm_rope', inputs (x, w, pos) and attrs {'eps': the norm's eps (default
    1e-6), **the rope's attrs}. Else None."""
    raise NotImplementedError("ch12b: fuse_qk_norm_rope is yours to write")


def planar_index(t, n, T, Ns):
    """Exercise 12b.2 (medium): where `matmul_cat` puts element (t, n) of the products laid side by
    side, x @ [w0; w1; ...].T (T rows, sum(Ns) columns): its output is planar, each product's
    [T, Ns[i]] block after the previous one. Return the flat index (an int); an IndexError
    outside the T x sum(Ns) products."""
    raise NotImplementedError("ch12b: planar_index is yours to write")
