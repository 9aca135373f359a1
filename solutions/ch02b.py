"""Chapter 02b (tensors: strides and views): reference solutions."""
__all__ = ["contiguous_strides", "tensor_nbytes", "broadcast_strides", "view_strides"]

# ggml type -> (elements per block, bytes per block), from ggml's block structs (the DType table above)
BLOCKS = {"F32": (1, 4), "F16": (1, 2), "BF16": (1, 2), "Q8_0": (32, 34), "Q4_0": (32, 18),
          "Q4_1": (32, 20), "Q5_0": (32, 22), "Q5_1": (32, 24), "Q4_K": (256, 144), "Q6_K": (256, 210)}


def contiguous_strides(shape):
    """Exercise 02b.1 (easy): C-order strides in elements of `shape`: (2, 3, 4) -> (12, 4, 1)."""
    out, step = [], 1
    for n in reversed(shape):
        out.append(step)
        step *= n
    return tuple(reversed(out))


def tensor_nbytes(shape, type_name):
    """Exercise 02b.2 (easy): bytes of a tensor of `shape` (numpy order, last axis = rows) stored
    as ggml type `type_name` ('F32', 'Q8_0', 'Q4_K', ...; see BLOCKS). Quantized rows are cut
    into blocks; a ValueError when the last axis is not a whole number of blocks."""
    block, size = BLOCKS[type_name]
    n = 1
    for s in shape:
        n *= s
    if shape and shape[-1] % block:
        raise ValueError(f"a row of {shape[-1]} is not whole {type_name} blocks of {block}")
    return n // block * size


def broadcast_strides(shape, strides, target):
    """Exercise 02b.3 (medium): strides (in elements) of a view of a tensor (`shape`, `strides`)
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
    """Exercise 02b.4 (hard): strides that show (`shape`, `strides`) as `new_shape` without a copy,
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
