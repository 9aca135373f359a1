"""Chapter 06 (the memory planner): reference solutions. A buffer is (size, first, last): its bytes
must stay untouched from step `first` to step `last`, both included."""
__all__ = ["lower_bound", "first_fit_offsets"]


def lower_bound(buffers):
    """Exercise 06.1 (easy): the most bytes alive at any one step — no plan can use less."""
    if not buffers:
        return 0
    steps = max(last for _, _, last in buffers) + 1
    return max(sum(s for s, f, l in buffers if f <= t <= l) for t in range(steps))


def first_fit_offsets(buffers, align=64):
    """Exercise 06.2 (medium): a static plan. Take the buffers in order of first use (ties: the
    bigger first, then by index), and give each the lowest offset, a multiple of `align`, where it
    overlaps in memory no buffer already placed whose lifetime overlaps its own. Return the offsets,
    in the order of `buffers`."""
    order = sorted(range(len(buffers)), key=lambda i: (buffers[i][1], -buffers[i][0], i))
    placed, offsets = [], [0] * len(buffers)
    for i in order:
        size, first, last = buffers[i]
        busy = sorted((offsets[j], offsets[j] + buffers[j][0]) for j in placed
                      if not (buffers[j][2] < first or last < buffers[j][1]))
        off = 0
        for lo, hi in busy:
            if off + size <= lo:
                break
            off = max(off, -(-hi // align) * align)
        offsets[i] = off
        placed.append(i)
    return offsets
