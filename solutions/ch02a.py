"""Chapter 02a (memory: allocators, pools): reference solutions."""
__all__ = ["coalesce", "worst_fit"]


def coalesce(holes):
    """Exercise 02a.1 (easy): free holes as (offset, size) pairs, in any order and possibly
    touching; return them sorted by offset with every pair of touching holes merged into one
    (what FreeListPool.free keeps true). Holes never overlap; size-0 holes are dropped."""
    out = []
    for off, size in sorted(h for h in holes if h[1] > 0):
        if out and out[-1][0] + out[-1][1] == off:
            out[-1] = (out[-1][0], out[-1][1] + size)
        else:
            out.append((off, size))
    return out


def worst_fit(holes, size):
    """Exercise 02a.2 (medium): a third fit policy. Among the holes (sorted (offset, size) pairs)
    that can take `size` bytes, the index of the largest one (the lowest offset on a tie), or None:
    worst fit leaves the biggest leftover hole."""
    best = None
    for i, (_, s) in enumerate(holes):
        if s >= size and (best is None or s > holes[best][1]):
            best = i
    return best
