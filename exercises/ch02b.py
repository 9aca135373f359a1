"""Chapter 02b (tensors: strides and views): your answers.

Write each function, then check it: pytest tests/exercises -k ch02b
(the reference answers are in solutions/ch02b.py: look once you have tried)
"""
__all__ = ['contiguous_strides', 'broadcast_strides', 'view_strides']


def contiguous_strides(shape):
    """Exercise 02b.1 (easy): C-order strides in elements of `shape`: (2, 3, 4) -> (12, 4, 1)."""
    raise NotImplementedError("ch02b: contiguous_strides is yours to write")


def broadcast_strides(shape, strides, target):
    """Exercise 02b.2 (medium): strides (in elements) of a view of a tensor (`shape`, `strides`)
    broadcast to `target` without copying: numpy's rules (align from the right; an axis of size 1,
    or a missing leading axis, gets stride 0). A ValueError when the shapes do not broadcast."""
    raise NotImplementedError("ch02b: broadcast_strides is yours to write")


def view_strides(shape, strides, new_shape):
    """Exercise 02b.3 (hard): strides that show (`shape`, `strides`) as `new_shape` without a copy,
    or None when a copy is needed (as numpy refuses `a.shape = new_shape`). Group old and new axes
    until their sizes match; each old group must be contiguous in itself. Sizes are all > 1."""
    raise NotImplementedError("ch02b: view_strides is yours to write")
