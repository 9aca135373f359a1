"""Chapter 11d (a mixture of experts on the GPU): your answers.

Write each function, then check it: python -m tffedu.exercises ch11d
(the reference answers are in solutions/ch11d.py: look once you have tried)
"""
import numpy as np
__all__ = ['sort_pairs', 'experts_touched']


def sort_pairs(ids, E, BM):
    """Exercise 11d.1 (medium): the pairs of a step (pair p = t k + j, the j-th expert of token t in
    ids [T, k]) grouped by expert, in pair order within an expert. Returns (perm, pos, tiles): perm[r]
    the pair at sorted row r, pos its inverse, tiles a list of (expert, first row, rows <= BM), the
    experts in order and each expert's rows cut from its first."""
    raise NotImplementedError("ch11d: sort_pairs is yours to write")


def experts_touched(T, E, k):
    """Exercise 11d.2 (easy): the expected number of distinct experts a step of T tokens reads, each
    token choosing k of the E experts at random (without repeats)."""
    raise NotImplementedError("ch11d: experts_touched is yours to write")
