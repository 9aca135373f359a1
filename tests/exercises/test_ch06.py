"""Chapter 06 exercises: the lower bound and a first-fit plan. References: a byte map per step
(numpy), and the plan's own properties: no two live buffers share a byte, none could go lower."""
import random

import numpy as np


def random_buffers(seed, n=30, steps=40):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        f = rng.randrange(steps)
        out.append((rng.choice([64, 100, 256, 1000, 4096]), f, min(steps - 1, f + rng.randrange(8))))
    return out


def test_ch06_1_lower_bound(impl):
    for seed in range(20):
        bufs = random_buffers(seed)
        alive = np.zeros(40, np.int64)
        for s, f, l in bufs:
            alive[f:l + 1] += s
        assert impl.lower_bound(bufs) == alive.max(), seed
    assert impl.lower_bound([]) == 0


def test_ch06_2_first_fit_offsets(impl):
    for seed in range(20):
        bufs = random_buffers(seed)
        off = list(impl.first_fit_offsets(bufs, 64))
        live = lambda i, j: not (bufs[i][2] < bufs[j][1] or bufs[j][2] < bufs[i][1])
        clash = lambda i, o, j: o < off[j] + bufs[j][0] and off[j] < o + bufs[i][0]
        assert all(o % 64 == 0 for o in off), seed
        for i in range(len(bufs)):
            for j in range(i):
                assert not (live(i, j) and clash(i, off[i], j)), (seed, i, j)
        order = sorted(range(len(bufs)), key=lambda i: (bufs[i][1], -bufs[i][0], i))
        for pos, i in enumerate(order):                 # lowest: every lower offset clashes
            before = order[:pos]
            for o in range(0, off[i], 64):
                assert any(live(i, j) and clash(i, o, j) for j in before), (seed, i, o)


def _bump(buffers, align=64):
    out, top = [], 0
    for s, _, _ in buffers:
        out.append(top)
        top += -(-s // align) * align
    return out


WRONG = {"test_ch06_1_lower_bound": {"sum-of-all": {"lower_bound": lambda b: sum(s for s, _, _ in b)}},
         "test_ch06_2_first_fit_offsets": {"no-reuse": {"first_fit_offsets": _bump}}}
