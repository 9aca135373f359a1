"""Chapter 11d (a mixture of experts on the GPU): reference solutions."""
import numpy as np

__all__ = ["sort_pairs", "experts_touched"]


def sort_pairs(ids, E, BM):
    """Exercise 11d.1 (medium): the pairs of a step (pair p = t k + j, the j-th expert of token t in
    ids [T, k]) grouped by expert, in pair order within an expert. Returns (perm, pos, tiles): perm[r]
    the pair at sorted row r, pos its inverse, tiles a list of (expert, first row, rows <= BM), the
    experts in order and each expert's rows cut from its first."""
    flat = np.asarray(ids).ravel()
    counts = np.bincount(flat, minlength=E)
    start = np.concatenate([[0], np.cumsum(counts)[:-1]])
    perm, seen = np.empty(len(flat), np.int64), np.zeros(E, np.int64)
    for p, e in enumerate(flat):                 # a counting sort: each pair after its expert's earlier ones
        perm[start[e] + seen[e]] = p
        seen[e] += 1
    pos = np.empty_like(perm)
    pos[perm] = np.arange(len(flat))
    tiles = [(e, int(start[e] + i), int(min(BM, counts[e] - i))) for e in range(E) for i in range(0, counts[e], BM)]
    return perm, pos, tiles


def experts_touched(T, E, k):
    """Exercise 11d.2 (easy): the expected number of distinct experts a step of T tokens reads, each
    token choosing k of the E experts at random (without repeats)."""
    return E * (1 - (1 - k / E) ** T)            # an expert is missed by a token with probability 1 - k/E
