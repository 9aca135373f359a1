"""Chapter 02a (memory: allocators, pools): your answers.

Write each function, then check it: python -m tffedu.exercises ch02a
(the reference answers are in solutions/ch02a.py: look once you have tried)
"""
__all__ = ['coalesce', 'worst_fit']


def coalesce(holes):
    """Exercise 02a.1 (easy): free holes as (offset, size) pairs, in any order and possibly
    touching; return them sorted by offset with every pair of touching holes merged into one
    (what FreeListPool.free keeps true). Holes never overlap; size-0 holes are dropped."""
    raise NotImplementedError("ch02a: coalesce is yours to write")


def worst_fit(holes, size):
    """Exercise 02a.2 (medium): a third fit policy. Among the holes (sorted (offset, size) pairs)
    that can take `size` bytes, the index of the largest one (the lowest offset on a tie), or None:
    worst fit leaves the biggest leftover hole."""
    raise NotImplementedError("ch02a: worst_fit is yours to write")
