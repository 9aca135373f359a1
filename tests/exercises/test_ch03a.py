"""Chapter 03a exercises: Q8_0, Q4_0 and IQ4_NL blocks. Reference: gguf-py's quants (llama.cpp's)."""
import gguf
import numpy as np
from gguf import GGMLQuantizationType as QT


def weights(n=32 * 64, seed=0):
    x = np.random.default_rng(seed).standard_normal(n).astype(np.float32)
    x[:32] = 0                               # an all-zero block: d = 0
    x[32:64] *= 1e-3
    x[64:96] = np.r_[127, np.arange(31) % 8 - 3.5]   # d = 1 exactly: x / d lands on halves
    return x


def test_ch03a_1_dequantize_q8_0(impl):
    raw = gguf.quants.quantize(weights(), QT.Q8_0)
    ref = gguf.quants.dequantize(raw, QT.Q8_0).reshape(-1)
    np.testing.assert_array_equal(np.asarray(impl.dequantize_q8_0(raw)).reshape(-1), ref)


def test_ch03a_2_quantize_q8_0(impl):
    for seed in range(3):
        x = weights(seed=seed)
        ref = gguf.quants.quantize(x, QT.Q8_0).reshape(-1)
        np.testing.assert_array_equal(np.asarray(impl.quantize_q8_0(x), np.uint8).reshape(-1), ref)


def test_ch03a_3_dequantize_q4_0(impl):
    raw = gguf.quants.quantize(weights(), QT.Q4_0)
    ref = gguf.quants.dequantize(raw, QT.Q4_0).reshape(-1)
    np.testing.assert_array_equal(np.asarray(impl.dequantize_q4_0(raw)).reshape(-1), ref)


def test_ch03a_4_dequantize_iq4_nl(impl):
    rng = np.random.default_rng(4)
    raw = rng.integers(0, 256, (64, 18), dtype=np.uint8)               # every code, random
    raw[:, :2] = rng.uniform(-0.1, 0.1, (64, 1)).astype(np.float16).view(np.uint8)
    ref = gguf.quants.dequantize(raw, QT.IQ4_NL).reshape(-1)
    np.testing.assert_array_equal(np.asarray(impl.dequantize_iq4_nl(raw.reshape(-1))).reshape(-1), ref)


def _banker(x):                              # np.round rounds halves to even: ggml does not
    x = np.asarray(x, np.float32).reshape(-1, 32)
    d = np.abs(x).max(axis=1, keepdims=True) / 127
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.round(np.where(d == 0, 0, x / d)).astype(np.int8)
    out = np.empty((x.shape[0], 34), np.uint8)
    out[:, :2] = d.astype(np.float16).view(np.uint8)
    out[:, 2:] = q.view(np.uint8)
    return out.reshape(-1)


def _interleaved(raw):                       # low/high nibbles as neighbours: the usual mistake
    b = np.frombuffer(bytes(raw), np.uint8).reshape(-1, 18)
    d = b[:, :2].copy().view(np.float16).astype(np.float32)
    q = np.stack([b[:, 2:] & 0x0F, b[:, 2:] >> 4], axis=2).reshape(-1, 32).astype(np.float32) - 8
    return (d * q).reshape(-1)


WRONG = {"test_ch03a_1_dequantize_q8_0": {"unsigned-q": {"dequantize_q8_0": lambda raw: (
             np.frombuffer(bytes(raw), np.uint8).reshape(-1, 34)[:, :2].copy().view(np.float16).astype(np.float32)
             * np.frombuffer(bytes(raw), np.uint8).reshape(-1, 34)[:, 2:]).reshape(-1)}},
         "test_ch03a_2_quantize_q8_0": {"round-half-even": {"quantize_q8_0": _banker}},
         "test_ch03a_3_dequantize_q4_0": {"interleaved-nibbles": {"dequantize_q4_0": _interleaved}},
         "test_ch03a_4_dequantize_iq4_nl": {"q4_0-levels": {"dequantize_iq4_nl": lambda raw: (
             np.frombuffer(bytes(raw), np.uint8).reshape(-1, 18)[:, :2].copy().view(np.float16).astype(np.float32)
             * (np.concatenate([np.frombuffer(bytes(raw), np.uint8).reshape(-1, 18)[:, 2:] & 0x0F,
                                np.frombuffer(bytes(raw), np.uint8).reshape(-1, 18)[:, 2:] >> 4], axis=1)
                .astype(np.float32) - 8)).reshape(-1)}}}
