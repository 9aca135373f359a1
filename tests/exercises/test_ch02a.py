"""Chapter 02a exercises: coalescing free holes (reference: a byte map in numpy) and worst fit
(reference: brute force over the holes)."""
import random

import numpy as np


def random_holes(seed, capacity=512):
    rng = random.Random(seed)
    free = np.array([rng.random() < 0.5 for _ in range(capacity)])
    holes, off = [], 0                      # cut each free run into random pieces, then shuffle
    while off < capacity:
        if free[off]:
            end = off
            while end < capacity and free[end]:
                end += 1
            while off < end:
                n = rng.randint(1, end - off)
                holes.append((off, n))
                off += n
        else:
            off += 1
    rng.shuffle(holes)
    return free, holes


def test_ch02a_1_coalesce(impl):
    for seed in range(30):
        free, holes = random_holes(seed)
        got = impl.coalesce(holes + [(7, 0)] if not free[7] else holes)
        edges = np.flatnonzero(np.diff(np.r_[0, free.astype(int), 0]))   # run starts and ends
        runs = [(int(a), int(b - a)) for a, b in zip(edges[::2], edges[1::2])]
        assert [tuple(h) for h in got] == runs, seed


def test_ch02a_2_worst_fit(impl):
    rng = random.Random(0)
    for _ in range(200):
        holes = sorted((rng.randrange(0, 10**6), rng.choice([64, 128, 256, 512, 1024]))
                       for _ in range(rng.randint(0, 8)))
        size = rng.choice([1, 100, 256, 600, 2000])
        fits = [i for i, (_, s) in enumerate(holes) if s >= size]
        ref = min(fits, key=lambda i: (-holes[i][1], holes[i][0])) if fits else None
        assert impl.worst_fit(holes, size) == ref, (holes, size)


WRONG = {"test_ch02a_1_coalesce": {"sort-only": {"coalesce": lambda holes: sorted(h for h in holes if h[1])}},
         "test_ch02a_2_worst_fit": {"best-fit": {"worst_fit": lambda holes, size: min(
             ((s, i) for i, (_, s) in enumerate(holes) if s >= size), default=(0, None))[1]}}}
