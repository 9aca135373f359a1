"""Chapter 11c exercises: a Q4_K unit from its bytes (reference: gguf-py's dequantization of the
block) and the GEMV's arithmetic for one unit (reference: the float64 product of the dequantized
activations and weights)."""
import gguf
import numpy as np
from gguf import GGMLQuantizationType as QT

rng = np.random.default_rng(0)


def random_q4_k(n):
    "Random 144-byte Q4_K blocks: every bit pattern of scales and codes, sane float16 d and dmin."
    b = rng.integers(0, 256, (n, 144), dtype=np.uint8)
    b[:, 0:4] = rng.uniform(1e-3, 0.1, (n, 2)).astype(np.float16).view(np.uint8)
    return b


def test_ch11c_1_q4_k_unit(impl):
    for block in random_q4_k(50):
        ref = gguf.quants.dequantize(block, QT.Q4_K).reshape(8, 32)
        for j in range(8):
            q, a, b = impl.q4_k_unit(block, j)
            assert np.array_equal(np.float32(a) * np.asarray(q, np.float32) + np.float32(b), ref[j]), j


def test_ch11c_2_unit_dot(impl):
    for seed in range(20):
        r = np.random.default_rng(seed)
        q, a, b = r.integers(0, 16, 32), np.float32(r.uniform(1e-3, 0.1)), np.float32(-r.uniform(0, 0.5))
        x = (r.standard_normal(32) * 10.0 ** r.uniform(-3, 3)).astype(np.float32)
        dx = np.abs(x).max() / np.float32(127)
        xs = np.rint(x / dx) * np.float64(dx)                     # the activations the kernel sees
        want = float(((a * q.astype(np.float64) + b) * xs).sum())
        assert abs(impl.unit_dot(q, a, b, x) - want) <= 1e-6 * max(1.0, abs(want))


def test_ch11c_3_fragment_words(impl):
    "PTX's m16n8k16 A fragment (a0..a7 of lane 4g + t: columns 2t, 2t+1, then + 8), two k16 slices."
    seen = []
    for t in range(4):
        elements, words = impl.fragment_words(t)
        ptx = [c + 16 * s for s in (0, 1) for c in (2 * t, 2 * t + 1, 2 * t + 8, 2 * t + 9)]
        assert list(elements) == sorted(ptx), t
        assert list(words) == sorted({e // 4 for e in ptx}) and len(words) == 4, t
        seen += list(elements)
    assert sorted(seen) == list(range(32))               # the quad multiplies the whole unit once


def _swapped_nibbles(block, j):
    from solutions.ch11c import q4_k_unit
    return q4_k_unit(block, j ^ 1)


def _every_word(t):
    from solutions.ch11c import fragment_words
    return fragment_words(t)[0], list(range(8))


def _no_minimum(q, a, b, x):
    from solutions.ch11c import unit_dot
    return unit_dot(q, a, 0.0, x)


WRONG = {"test_ch11c_1_q4_k_unit": {"low-high-swapped": {"q4_k_unit": _swapped_nibbles}},
         "test_ch11c_2_unit_dot": {"no-minimum": {"unit_dot": _no_minimum}},
         "test_ch11c_3_fragment_words": {"every-word": {"fragment_words": _every_word}}}
