"""Chapter 02b (tensors: strides and views): your answers.

Write each function, then check it: python -m tffedu.exercises ch02b
(the reference answers are in solutions/ch02b.py: look once you have tried)
"""
__all__ = ['contiguous_strides', 'tensor_nbytes', 'broadcast_strides', 'view_strides']

# ggml type -> (elements per block, bytes per block), from ggml's block structs (the DType table above)
BLOCKS = {"F32": (1, 4), "F16": (1, 2), "BF16": (1, 2), "Q8_0": (32, 34), "Q4_0": (32, 18),
          "Q4_1": (32, 20), "Q5_0": (32, 22), "Q5_1": (32, 24), "Q4_K": (256, 144), "Q6_K": (256, 210)}


def contiguous_strides(shape):
    """Exercise 02b.1 (easy): C-order strides in elements of `shape`: (2, 3, 4) -> (12, 4, 1)."""
    raise NotImplementedError("ch02b: contiguous_strides is yours to write")


def tensor_nbytes(shape, type_name):
    """Exercise 02b.2 (easy): bytes of a tensor of `shape` (numpy order, last axis = rows) stored
    as ggml type `type_name` ('F32', 'Q8_0', 'Q4_K', ...; see BLOCKS). Quantized rows are cut
    into blocks; a ValueError when the last axis is not a whole number of blocks."""
    raise NotImplementedError("ch02b: tensor_nbytes is yours to write")


def broadcast_strides(shape, strides, target):
    """Exercise 02b.3 (medium): strides (in elements) of a view of a tensor (`shape`, `strides`)
    broadcast to `target` without copying: numpy's rules (align from the right; an axis of size 1,
    or a missing leading axis, gets stride 0). A ValueError when the shapes do not broadcast."""
    raise NotImplementedError("ch02b: broadcast_strides is yours to write")


def view_strides(shape, strides, new_shape):
    """Exercise 02b.4 (hard): strides that show (`shape`, `strides`) as `new_shape` without a copy,
    or None when a copy is needed (as numpy refuses `a.shape = new_shape`). Group old and new axes
    until their sizes match; each old group must be contiguous in itself. Sizes are all > 1."""
    raise NotImplementedError("ch02b: view_strides is yours to write")
