"""Chapter 02b (tensors: strides and views): reference solutions."""
__all__ = ["contiguous_strides", "broadcast_strides", "view_strides"]


def contiguous_strides(shape):
    """Exercise 02b.1 (easy): C-order strides in elements of `shape`: (2, 3, 4) -> (12, 4, 1)."""
    out, step = [], 1
    for n in reversed(shape):
        out.append(step)
        step *= n
    return tuple(reversed(out))


def broadcast_strides(shape, strides, target):
    """Exercise 02b.2 (medium): strides (in elements) of a view of a tensor (`shape`, `strides`)
    broadcast to `target` without copying: numpy's rules (align from the right; an axis of size 1,
    or a missing leading axis, gets stride 0). A ValueError when the shapes do not broadcast."""
    if len(target) < len(shape):
        raise ValueError(f"cannot broadcast {shape} to {target}")
    pad = len(target) - len(shape)
    out = [0] * pad
    for n, s, t in zip(shape, strides, target[pad:]):
        if n == t:
            out.append(s if t != 1 else 0)
        elif n == 1:
            out.append(0)
        else:
            raise ValueError(f"cannot broadcast {shape} to {target}")
    return tuple(out)


def view_strides(shape, strides, new_shape):
    """Exercise 02b.3 (hard): strides that show (`shape`, `strides`) as `new_shape` without a copy,
    or None when a copy is needed (as numpy refuses `a.shape = new_shape`). Group old and new axes
    until their sizes match; each old group must be contiguous in itself. Sizes are all > 1."""
    new = [0] * len(new_shape)
    oi = ni = 0
    while oi < len(shape) and ni < len(new_shape):
        oj, nj, po, pn = oi + 1, ni + 1, shape[oi], new_shape[ni]
        while po != pn:
            if pn < po:
                pn *= new_shape[nj]; nj += 1
            else:
                po *= shape[oj]; oj += 1
        for k in range(oi, oj - 1):
            if strides[k] != shape[k + 1] * strides[k + 1]:
                return None
        new[nj - 1] = strides[oj - 1]
        for k in range(nj - 1, ni, -1):
            new[k - 1] = new[k] * new_shape[k]
        oi, ni = oj, nj
    return tuple(new)
