"""Chapter 13 exercises: batch buckets (reference: brute force) and varlen packing (reference:
torch.cat and torch.cumsum)."""
import numpy as np
import pytest
import torch


def test_ch13_1_bucket_for(impl):
    buckets = [1, 2, 4, 8, 16, 32, 64]
    for n in range(1, 65):
        assert impl.bucket_for(n, buckets) == min(b for b in buckets if b >= n)
    with pytest.raises(ValueError):
        impl.bucket_for(65, buckets)


def test_ch13_2_pack_varlen(impl):
    seqs = [[5, 6, 7], [1], [9, 9, 9, 9, 2], [3, 4]]
    tokens, cu = impl.pack_varlen(seqs)
    ref_t = torch.cat([torch.tensor(s) for s in seqs])
    ref_cu = torch.nn.functional.pad(torch.cumsum(torch.tensor([len(s) for s in seqs]), 0), (1, 0))
    np.testing.assert_array_equal(tokens, ref_t.numpy())
    np.testing.assert_array_equal(cu, ref_cu.numpy())
    assert np.asarray(cu).dtype == np.int32


WRONG = {"test_ch13_1_bucket_for": {"next-power-of-two": {"bucket_for": lambda n, b: 1 << (n - 1).bit_length() if n <= 64 else 1 / 0}},
         "test_ch13_2_pack_varlen": {"ends-only": {"pack_varlen": lambda seqs: (
             np.concatenate([np.asarray(s, np.int32) for s in seqs]),
             np.cumsum([len(s) for s in seqs]).astype(np.int32))}}}
