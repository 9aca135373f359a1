"""Chapter 11b exercises: the packed int8 activations (reference: numpy's rounding of each block of
32, and every value decoded back within half a step) and the F16 path's scratch (reference: the
byte counts of the cast and the zero padding, worked out here from the tensor cores' rule)."""
import numpy as np

rng = np.random.default_rng(0)


def test_ch11b_1_pack_q8_act(impl):
    for T, K in [(1, 32), (3, 256), (5, 4096)]:
        h = (rng.standard_normal((T, K)) * 10.0 ** rng.uniform(-3, 3, (T, 1))).astype(np.float32)
        h[0, :32] = 0                                                       # a block of zeros
        got = np.asarray(impl.pack_q8_act(h))
        assert got.dtype == np.uint8 and got.shape == (T, K + K // 8), (got.dtype, got.shape)
        flat = got.reshape(-1)
        q = flat[:T * K].view(np.int8).reshape(T, K // 32, 32).astype(np.float64)
        d = flat[T * K:].copy().view(np.float32).reshape(T, K // 32)
        blk = h.reshape(T, K // 32, 32)
        np.testing.assert_array_equal(d, np.abs(blk).max(-1) / np.float32(127))
        assert (np.abs(q).max(-1)[d > 0] == 127).all()                      # the largest value is +-127
        err = np.abs(q * d[..., None] - blk)
        assert (err <= d[..., None] * 0.5 * (1 + 1e-5) + 1e-30).all()       # within half a step


def test_ch11b_2_gemm16_scratch(impl):
    for T, K, N, xk in [(1, 64, 10, "F16"), (3, 64, 10, "F32"), (5, 131, 77, "F16"), (7, 33, 65, "F32"),
                        (300, 4096, 1024, "F32")]:
        Kp = -(-K // 8) * 8                                                 # 8 fp16 = one 16-byte piece
        want = ([] if xk == "F16" else [T * K * 2]) + ([T * Kp * 2, N * Kp * 2] if Kp != K else [])
        assert list(impl.gemm16_scratch(T, K, N, xk)) == want, (T, K, N, xk)


def _scales_first(h):
    q = _packed(h)
    T, K = np.asarray(h).shape
    return np.concatenate([q.reshape(-1)[T * K:], q.reshape(-1)[:T * K]]).reshape(T, -1)


def _packed(h):
    from solutions.ch11b import pack_q8_act
    return pack_q8_act(h)


def _no_padding(T, K, N, xk):
    return [] if xk == "F16" else [T * K * 2]


WRONG = {"test_ch11b_1_pack_q8_act": {"scales-first": {"pack_q8_act": _scales_first}},
         "test_ch11b_2_gemm16_scratch": {"no-padding": {"gemm16_scratch": _no_padding}}}
