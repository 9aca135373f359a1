"""Chapter 11a exercises: version 6's exact dequantization (reference: gguf-py's dequantize rounded
to float16, bit for bit) and version 7's TMA box (checked against TMA's rules: a 16-byte aligned
start, the whole tile inside 80 bytes)."""
import gguf
import numpy as np
from gguf import GGMLQuantizationType as QT

rng = np.random.default_rng(0)


def test_ch11a_1_dequant_bias_trick(impl):
    W = rng.standard_normal((64, 128)) * 10.0 ** rng.uniform(-8, 2, (64, 1))     # subnormal to large scales
    b = gguf.quants.quantize(W.astype(np.float32), QT.Q8_0).reshape(64, 4, 34)
    d = b[..., :2].copy().view(np.float16)                                   # [64, 4, 1]
    q = b[..., 2:].copy().view(np.int8)                                      # [64, 4, 32]
    ref = gguf.quants.dequantize(b.reshape(64, -1), QT.Q8_0).astype(np.float16).reshape(64, 4, 32)
    got = np.asarray(impl.dequant_bias_trick(q, d))
    assert got.dtype == np.float16 and got.shape == q.shape
    np.testing.assert_array_equal(got.view(np.uint16), ref.view(np.uint16))


def test_ch11a_2_tma_weight_box(impl):
    for kt in range(1000):
        start, offset = impl.tma_weight_box(kt)
        assert start % 16 == 0, (kt, start)                                  # TMA's rule
        assert start <= 68 * kt and 68 * kt + 68 <= start + 80, (kt, start)  # the tile inside the box
        assert offset == 68 * kt - start, (kt, offset)


def _bias_127(q, d):         # the wrong bias: every weight off by one step of d
    h = (np.uint16(0x6400) | (np.asarray(q, np.int8).view(np.uint8) ^ np.uint8(0x80)).astype(np.uint16)).view(np.float16)
    return (h - np.float16(1151)) * np.asarray(d, np.float16)


def _box_at_tile(kt):        # no rounding: 68 kt is 16-byte aligned only when kt % 4 == 0
    return 68 * kt, 0


def _box_rounded_up(kt):     # aligned, but past the tile's first bytes
    start = -(-68 * kt // 16) * 16
    return start, 68 * kt - start


WRONG = {"test_ch11a_1_dequant_bias_trick": {"bias-1151": {"dequant_bias_trick": _bias_127}},
         "test_ch11a_2_tma_weight_box": {"unaligned": {"tma_weight_box": _box_at_tile},
                                         "rounded-up": {"tma_weight_box": _box_rounded_up}}}
