"""Chapter 11d exercises: the pairs of a step sorted by expert into tiles (reference: numpy's stable
argsort) and the experts a step touches (reference: a simulation of random routers)."""
import numpy as np


def test_ch11d_1_sort_pairs(impl):
    rng = np.random.default_rng(0)
    for T, E, k, BM in ((1, 8, 2, 1), (40, 16, 4, 8), (64, 128, 8, 4), (5, 3, 3, 2)):
        ids = np.stack([rng.permutation(E)[:k] for _ in range(T)])
        perm, pos, tiles = impl.sort_pairs(ids, E, BM)
        flat = ids.ravel()
        np.testing.assert_array_equal(np.asarray(perm), np.argsort(flat, kind="stable"))
        np.testing.assert_array_equal(np.asarray(pos)[np.asarray(perm)], np.arange(T * k))
        covered = np.zeros(T * k, int)
        for e, r0, n in tiles:
            assert 1 <= n <= BM and np.all(flat[np.asarray(perm)[r0:r0 + n]] == e), (e, r0, n)
            covered[r0:r0 + n] += 1
        assert np.all(covered == 1)
        assert [t[0] for t in tiles] == sorted(t[0] for t in tiles)
        assert len(tiles) == sum(-(-c // BM) for c in np.bincount(flat, minlength=E))


def test_ch11d_2_experts_touched(impl):
    rng = np.random.default_rng(1)
    for T, E, k in ((1, 128, 8), (4, 128, 8), (32, 128, 8), (10, 16, 2)):
        sim = np.mean([len(np.unique(np.concatenate([rng.permutation(E)[:k] for _ in range(T)])))
                       for _ in range(400)])
        assert abs(impl.experts_touched(T, E, k) - sim) < 0.03 * E, (T, E, k, sim)


def _reversed_within(ids, E, BM):
    "Grouped by expert, but the last pair of an expert first (an order no kernel run would repeat)."
    flat = np.asarray(ids).ravel()
    perm = np.lexsort((-np.arange(len(flat)), flat))
    pos = np.empty_like(perm)
    pos[perm] = np.arange(len(flat))
    counts = np.bincount(flat, minlength=E)
    start = np.concatenate([[0], np.cumsum(counts)[:-1]])
    return perm, pos, [(e, int(start[e] + i), int(min(BM, counts[e] - i))) for e in range(E) for i in range(0, counts[e], BM)]


WRONG = {"test_ch11d_1_sort_pairs": {"reversed-within-an-expert": {"sort_pairs": _reversed_within}},
         "test_ch11d_2_experts_touched": {"k-times-T": {"experts_touched": lambda T, E, k: min(E, k * T)}}}
