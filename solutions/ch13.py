"""Chapter 13 (the GPU runtime): reference solutions."""
from dataclasses import replace

__all__ = ["step_input_bytes", "padding", "fuse_qk_norm_rope", "planar_index"]


def step_input_bytes(B, max_pages, align=256):
    """Exercise 13.1 (easy): the bytes one decode step of B sequences copies to the device: the
    inputs of the runner's graph, int32 each — ids, pos, slots and last [B], page_tables
    [B, max_pages], seq_lens [B], cu_seqlens [B + 1] — each rounded up to `align` bytes, the way
    the executor packs them at the start of its memory block."""
    def up(n):
        return -(-n // align) * align
    return sum(up(4 * n) for n in (B, B, B, B, B * max_pages, B, B + 1))


def padding(sizes, buckets):
    """Exercise 13.2 (medium): a trace of step sizes (tokens or sequences per step) runs each step
    in the smallest bucket >= its size; return the total padded rows (bucket - size, summed).
    A ValueError when a size fits no bucket."""
    total = 0
    for n in sizes:
        fits = [b for b in buckets if b >= n]
        if not fits:
            raise ValueError(f"a step of {n} fits no bucket of {sorted(buckets)}")
        total += min(fits) - n
    return total


def fuse_qk_norm_rope(n, users):
    """Exercise 13.3 (hard): the lowering rule of section 3, for chapter 05's `fuse`. Given a node
    `n` and `users` (node -> the op nodes that read it), return the fused node when `n` is a
    `rope` whose input is a per-head `rmsnorm` (3-D, with a weight) that nothing else reads: a copy
    of `n` with op 'qk_norm_rope', inputs (x, w, pos) and attrs {'eps': the norm's eps (default
    1e-6), **the rope's attrs}. Else None."""
    if n.op != "rope":
        return None
    r, pos = n.inputs
    if r.kind != "op" or r.op != "rmsnorm" or len(r.inputs) != 2 or len(r.shape) != 3 or users[r] != [n]:
        return None
    x, w = r.inputs
    return replace(n, op="qk_norm_rope", inputs=(x, w, pos), attrs={"eps": r.attrs.get("eps", 1e-6), **n.attrs})


def planar_index(t, n, T, Ns):
    """Exercise 13.4 (medium): where `matmul_cat` puts element (t, n) of the products laid side by
    side, x @ [w0; w1; ...].T (T rows, sum(Ns) columns): its output is planar, each product's
    [T, Ns[i]] block after the previous one. Return the flat index (an int); an IndexError
    outside the T x sum(Ns) products."""
    if not (0 <= t < T and 0 <= n < sum(Ns)):
        raise IndexError(f"({t}, {n}) is outside {T} x {sum(Ns)}")
    start = 0
    for rows in Ns:
        if n < start + rows:
            return T * start + t * rows + (n - start)
        start += rows
