"""Chapter 02 (devices, memory and tensors, part 1: devices): your answers.

Write each function, then check it: pytest tests/exercises -k ch02
(the reference answers are in solutions/ch02.py: look once you have tried)
"""
__all__ = ['align_up_pow2', 'tensor_nbytes']


def align_up_pow2(n, align):
    """Exercise 02.1 (easy): round n >= 0 up to a multiple of `align`, a power of two, with bit
    operations only (no division, no modulo): what an allocator does to every size and address.
    A ValueError when `align` is not a power of two."""
    raise NotImplementedError("ch02: align_up_pow2 is yours to write")


def tensor_nbytes(shape, type_name):
    """Exercise 02.2 (medium): bytes of a tensor of `shape` (numpy order, last axis = rows) stored
    as ggml type `type_name` ('F32', 'Q8_0', 'Q4_K', ...; see BLOCKS). Quantized rows are cut
    into blocks; a ValueError when the last axis is not a whole number of blocks."""
    raise NotImplementedError("ch02: tensor_nbytes is yours to write")
