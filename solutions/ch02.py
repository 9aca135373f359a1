"""Chapter 02 (devices, memory and tensors, part 1: devices): reference solutions."""
__all__ = ["align_up_pow2", "tensor_nbytes"]

# ggml type -> (elements per block, bytes per block), from ggml's block structs (chapter 02b's table)
BLOCKS = {"F32": (1, 4), "F16": (1, 2), "BF16": (1, 2), "Q8_0": (32, 34), "Q4_0": (32, 18),
          "Q4_1": (32, 20), "Q5_0": (32, 22), "Q5_1": (32, 24), "Q4_K": (256, 144), "Q6_K": (256, 210)}


def align_up_pow2(n, align):
    """Exercise 02.1 (easy): round n >= 0 up to a multiple of `align`, a power of two, with bit
    operations only (no division, no modulo): what an allocator does to every size and address.
    A ValueError when `align` is not a power of two."""
    if align <= 0 or align & (align - 1):
        raise ValueError(f"align must be a power of two, got {align}")
    return (n + align - 1) & ~(align - 1)


def tensor_nbytes(shape, type_name):
    """Exercise 02.2 (medium): bytes of a tensor of `shape` (numpy order, last axis = rows) stored
    as ggml type `type_name` ('F32', 'Q8_0', 'Q4_K', ...; see BLOCKS). Quantized rows are cut
    into blocks; a ValueError when the last axis is not a whole number of blocks."""
    block, size = BLOCKS[type_name]
    n = 1
    for s in shape:
        n *= s
    if shape and shape[-1] % block:
        raise ValueError(f"a row of {shape[-1]} is not whole {type_name} blocks of {block}")
    return n // block * size
