"""Chapter 02 (devices, memory and tensors, part 1: devices): your answers.

Write each function, then check it: python -m tffedu.exercises ch02
(the reference answers are in solutions/ch02.py: look once you have tried)
"""
__all__ = ['align_up_pow2', 'shutdown']


def align_up_pow2(n, align):
    """Exercise 02.1 (easy): round n >= 0 up to a multiple of `align`, a power of two, with bit
    operations only (no division, no modulo): what an allocator does to every size and address.
    A ValueError when `align` is not a power of two."""
    raise NotImplementedError("ch02: align_up_pow2 is yours to write")


def shutdown(hooks):
    """Exercise 02.2 (medium): what a process does at exit with its exit hooks (tffedu.device runs
    the ones registered with `on_cuda_exit` before it lets the CUDA context go): call every hook of
    the list, last registered first; a hook that raises must not stop the others. Return the
    exceptions raised, in the order they happened."""
    raise NotImplementedError("ch02: shutdown is yours to write")
