"""Chapter 11 exercises: a tiled matmul (reference: numpy's float64 product), a Q8_0 GEMV on the
raw blocks (reference: gguf-py's dequantize, then a float64 product), version 6's exact
dequantization (reference: gguf-py's dequantize rounded to float16, bit for bit), version 7's TMA
box (checked against TMA's rules: 16-byte aligned start, the whole tile inside 80 bytes) and the
MMQ product (reference: gguf-py's dequantized weights times the dequantized int8 activations)."""
import gguf
import numpy as np
from gguf import GGMLQuantizationType as QT

rng = np.random.default_rng(0)


def test_ch11_1_tiled_matmul(impl):
    for M, K, N, tile in [(33, 47, 20, 16), (64, 64, 64, 32), (5, 3, 7, 4)]:
        a, b = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)
        np.testing.assert_allclose(impl.tiled_matmul(a, b, tile), a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


def test_ch11_2_q8_0_gemv(impl):
    W = rng.standard_normal((48, 256)).astype(np.float32)
    raw = gguf.quants.quantize(W, QT.Q8_0)
    x = rng.standard_normal(256).astype(np.float32)
    ref = gguf.quants.dequantize(raw, QT.Q8_0).astype(np.float64) @ x
    np.testing.assert_allclose(impl.q8_0_gemv(x, raw, 48), ref, rtol=1e-4, atol=1e-3)


def test_ch11_3_dequant_bias_trick(impl):
    W = rng.standard_normal((64, 128)) * 10.0 ** rng.uniform(-8, 2, (64, 1))     # subnormal to large scales
    b = gguf.quants.quantize(W.astype(np.float32), QT.Q8_0).reshape(64, 4, 34)
    d = b[..., :2].copy().view(np.float16)                                   # [64, 4, 1]
    q = b[..., 2:].copy().view(np.int8)                                      # [64, 4, 32]
    ref = gguf.quants.dequantize(b.reshape(64, -1), QT.Q8_0).astype(np.float16).reshape(64, 4, 32)
    got = np.asarray(impl.dequant_bias_trick(q, d))
    assert got.dtype == np.float16 and got.shape == q.shape
    np.testing.assert_array_equal(got.view(np.uint16), ref.view(np.uint16))


def test_ch11_4_tma_weight_box(impl):
    for kt in range(1000):
        start, offset = impl.tma_weight_box(kt)
        assert start % 16 == 0, (kt, start)                                  # TMA's rule
        assert start <= 68 * kt and 68 * kt + 68 <= start + 80, (kt, start)  # the tile inside the box
        assert offset == 68 * kt - start, (kt, offset)


def _whole_tiles_only(a, b, tile=16):
    M, K = a.shape
    return np.asarray(a[:, :K // tile * tile], np.float32) @ np.asarray(b[:K // tile * tile], np.float32)


def _bias_127(q, d):         # the wrong bias: every weight off by one step of d
    h = (np.uint16(0x6400) | (np.asarray(q, np.int8).view(np.uint8) ^ np.uint8(0x80)).astype(np.uint16)).view(np.float16)
    return (h - np.float16(1151)) * np.asarray(d, np.float16)


def _no_scale(x, raw, n_rows):
    b = np.asarray(raw, np.uint8).reshape(n_rows, -1, 34)
    return (b[..., 2:].copy().view(np.int8).astype(np.float32).reshape(n_rows, -1) * x).sum(-1)


def _box_at_tile(kt):        # no rounding: 68 kt is 16-byte aligned only when kt % 4 == 0
    return 68 * kt, 0


def _box_rounded_up(kt):     # aligned, but past the tile's first bytes
    start = -(-68 * kt // 16) * 16
    return start, 68 * kt - start


WRONG = {"test_ch11_1_tiled_matmul": {"drops-partial-k": {"tiled_matmul": _whole_tiles_only}},
         "test_ch11_2_q8_0_gemv": {"no-scale": {"q8_0_gemv": _no_scale}},
         "test_ch11_3_dequant_bias_trick": {"bias-1151": {"dequant_bias_trick": _bias_127}},
         "test_ch11_4_tma_weight_box": {"unaligned": {"tma_weight_box": _box_at_tile},
                                        "rounded-up": {"tma_weight_box": _box_rounded_up}}}
