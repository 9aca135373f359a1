"""Chapter 12a exercises: V transposed by 8 x 8 blocks (reference: numpy's transpose) and TMA's
128-byte swizzle (checked against what it is for: a bijection within every row, and the eight rows
one `ldmatrix` phase reads, at one logical chunk, in eight different 16-byte bank groups)."""
import numpy as np

rng = np.random.default_rng(0)


def test_ch12a_1_transpose_by_blocks(impl):
    for keys, dim in [(8, 8), (64, 128), (24, 40)]:
        v = rng.standard_normal((keys, dim)).astype(np.float16)
        np.testing.assert_array_equal(np.asarray(impl.transpose_by_blocks(v)), v.T)


def test_ch12a_2_swizzle_128b(impl):
    for row in range(64):
        assert sorted(impl.swizzle_128b(row, c) for c in range(8)) == list(range(8)), row     # a bijection
    for base in range(0, 64, 8):
        for c in range(8):
            banks = {impl.swizzle_128b(base + r, c) for r in range(8)}
            assert len(banks) == 8, (base, c, banks)        # 8 rows of one column: no bank conflict


def _blocks_moved_not_transposed(v):      # each block to its mirror place, but not transposed
    v = np.asarray(v)
    keys, dim = v.shape
    out = np.empty((dim, keys), v.dtype)
    for i in range(0, keys, 8):
        for j in range(0, dim, 8):
            out[j:j + 8, i:i + 8] = v[i:i + 8, j:j + 8]
    return out


def _no_swizzle(row, chunk):
    return chunk


WRONG = {"test_ch12a_1_transpose_by_blocks": {"not-transposed": {"transpose_by_blocks": _blocks_moved_not_transposed}},
         "test_ch12a_2_swizzle_128b": {"plain-rows": {"swizzle_128b": _no_swizzle}}}
