"""Chapter 12b (lowering): reference solutions."""
from dataclasses import replace

__all__ = ["fuse_qk_norm_rope", "planar_index"]


def fuse_qk_norm_rope(n, users):
    """Exercise 12b.1 (hard): the lowering rule of section 2, for chapter 05's `fuse`. Given a node
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
    """Exercise 12b.2 (medium): where `matmul_cat` puts element (t, n) of the products laid side by
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
