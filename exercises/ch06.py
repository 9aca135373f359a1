"""Chapter 06 (the memory planner): your answers. A buffer is (size, first, last): its bytes
must stay untouched from step `first` to step `last`, both included.

Write each function, then check it: python -m tffedu.exercises ch06
(the reference answers are in solutions/ch06.py: look once you have tried)
"""
__all__ = ['lower_bound', 'first_fit_offsets']


def lower_bound(buffers):
    """Exercise 06.1 (easy): the most bytes alive at any one step — no plan can use less."""
    raise NotImplementedError("ch06: lower_bound is yours to write")


def first_fit_offsets(buffers, align=64):
    """Exercise 06.2 (medium): a static plan. Take the buffers in order of first use (ties: the
    bigger first, then by index), and give each the lowest offset, a multiple of `align`, where it
    overlaps in memory no buffer already placed whose lifetime overlaps its own. Return the offsets,
    in the order of `buffers`."""
    raise NotImplementedError("ch06: first_fit_offsets is yours to write")
