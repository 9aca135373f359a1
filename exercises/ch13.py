"""Chapter 13 (the GPU runtime): your answers.

Write each function, then check it: pytest tests/exercises -k ch13
(the reference answers are in solutions/ch13.py: look once you have tried)
"""
import bisect
import numpy as np
__all__ = ['bucket_for', 'pack_varlen']


def bucket_for(n, buckets):
    """Exercise 13.1 (easy): CUDA graphs are captured for a few batch sizes (sorted `buckets`); a
    batch of n runs in the smallest bucket >= n, padded. Return it; a ValueError when n > the largest."""
    raise NotImplementedError("ch13: bucket_for is yours to write")


def pack_varlen(seqs):
    """Exercise 13.2 (medium): several sequences of new tokens in one flat batch, as a varlen
    attention kernel reads them: (tokens, cu_seqlens) with tokens the concatenation and cu_seqlens
    the int32 offsets [0, len0, len0 + len1, ...] (length len(seqs) + 1)."""
    raise NotImplementedError("ch13: pack_varlen is yours to write")
