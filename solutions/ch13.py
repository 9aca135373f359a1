"""Chapter 13 (the GPU runtime): reference solutions."""
import bisect

import numpy as np

__all__ = ["bucket_for", "pack_varlen"]


def bucket_for(n, buckets):
    """Exercise 13.1 (easy): CUDA graphs are captured for a few batch sizes (sorted `buckets`); a
    batch of n runs in the smallest bucket >= n, padded. Return it; a ValueError when n > the largest."""
    i = bisect.bisect_left(buckets, n)
    if i == len(buckets):
        raise ValueError(f"a batch of {n} is larger than the largest bucket {buckets[-1]}")
    return buckets[i]


def pack_varlen(seqs):
    """Exercise 13.2 (medium): several sequences of new tokens in one flat batch, as a varlen
    attention kernel reads them: (tokens, cu_seqlens) with tokens the concatenation and cu_seqlens
    the int32 offsets [0, len0, len0 + len1, ...] (length len(seqs) + 1)."""
    lens = [len(s) for s in seqs]
    tokens = np.concatenate([np.asarray(s, np.int32) for s in seqs]) if seqs else np.zeros(0, np.int32)
    return tokens, np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
