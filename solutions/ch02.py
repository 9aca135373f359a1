"""Chapter 02 (devices, memory and tensors, part 1: devices): reference solutions."""
__all__ = ["align_up_pow2", "shutdown"]


def align_up_pow2(n, align):
    """Exercise 02.1 (easy): round n >= 0 up to a multiple of `align`, a power of two, with bit
    operations only (no division, no modulo): what an allocator does to every size and address.
    A ValueError when `align` is not a power of two."""
    if align <= 0 or align & (align - 1):
        raise ValueError(f"align must be a power of two, got {align}")
    return (n + align - 1) & ~(align - 1)


def shutdown(hooks):
    """Exercise 02.2 (medium): what a process does at exit with its exit hooks (tffedu.device runs
    the ones registered with `on_cuda_exit` before it lets the CUDA context go): call every hook of
    the list, last registered first; a hook that raises must not stop the others. Return the
    exceptions raised, in the order they happened."""
    errors = []
    for fn in reversed(hooks):
        try:
            fn()
        except Exception as e:
            errors.append(e)
    return errors
