"""Chapter 14c exercises: a token's K/V bytes (reference: tffedu's own DTYPES table, which chapter 03a
checks against gguf-py's block sizes) and where a decode lane's codes and scale sit in a Q8_0 row
(reference: gguf-py's quantize and dequantize of random rows, read back at the offsets)."""
import numpy as np
from gguf import GGMLQuantizationType, quants

from tffedu.tensor import DTYPES

rng = np.random.default_rng(0)


def test_ch14c_1_kv_bytes_per_token(impl):
    for n_layer, n_kv, head_dim in [(36, 8, 128), (28, 8, 128), (2, 1, 32), (48, 4, 64)]:
        for t in ("F16", "Q8_0"):
            want = 2 * n_layer * n_kv * DTYPES[t].nbytes(head_dim)
            assert impl.kv_bytes_per_token(n_layer, n_kv, head_dim, t) == want, (n_layer, n_kv, head_dim, t)


def test_ch14c_2_lane_offsets(impl):
    q8 = GGMLQuantizationType.Q8_0
    for head_dim in (32, 64, 128, 256):
        rows = rng.standard_normal((3, head_dim)).astype(np.float32) * [[1.0], [1e-3], [50.0]]
        for row in rows:
            raw = quants.quantize(row, q8).ravel()                    # head_dim / 32 blocks of 34 bytes
            want = quants.dequantize(raw, q8).ravel()
            for d0 in range(0, head_dim, 8):
                s, codes = impl.lane_offsets(d0, head_dim)
                assert len(codes) == 8, (head_dim, d0)
                scale = raw[s:s + 2].view(np.float16).astype(np.float32)[0]
                got = scale * raw[np.asarray(codes)].view(np.int8).astype(np.float32)
                np.testing.assert_array_equal(got, want[d0:d0 + 8], err_msg=f"head_dim {head_dim}, d0 {d0}")


def _f16_for_both(n_layer, n_kv_heads, head_dim, kv_dtype):      # forgets that Q8_0 is 8 bits
    return 2 * n_layer * n_kv_heads * 2 * head_dim


def _no_scales_between(d0, head_dim):                             # codes as if the row were all codes
    return d0 // 32 * 34, [d0 + i for i in range(8)]


WRONG = {"test_ch14c_1_kv_bytes_per_token": {"f16-for-both": {"kv_bytes_per_token": _f16_for_both}},
         "test_ch14c_2_lane_offsets": {"no-scales-between": {"lane_offsets": _no_scales_between}}}
