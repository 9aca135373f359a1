"""Chapter 11c exercises: a Q4_K unit from its bytes (reference: gguf-py's dequantization of the
block), a direct-road lane's share of a padded Q6_K block (the same reference) and the GEMV's
arithmetic for one unit (reference: the float64 product of the dequantized
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


def test_ch11c_4_q6_kp_lane(impl):
    seen = []
    for n in range(20):
        block = rng.integers(0, 256, 210, dtype=np.uint8)
        block[208:210] = np.array([rng.uniform(1e-4, 1e-2)], np.float16).view(np.uint8)
        ref = gguf.quants.dequantize(block, QT.Q6_K).reshape(256)
        padded = np.concatenate([block, np.zeros(6, np.uint8)])
        for c16 in range(8):
            elements, values = impl.q6_kp_lane(padded, c16)
            assert len(elements) == 32, f"lane {c16} decodes 32 weights, got {len(elements)}"
            assert np.array_equal(np.asarray(values, np.float32), ref[list(elements)]), \
                f"lane {c16} of block {n}: weights at elements {list(elements)[:4]}... differ from gguf-py's"
            if n == 0:
                seen += list(elements)
    assert sorted(seen) == list(range(256)), "the eight lanes cover the super-block once"


def _q4_k_lanes(block, c16):                  # Q4_K's mapping: units 2c and 2c + 1
    from solutions.ch11c import q6_kp_lane
    elements, values = q6_kp_lane(block, c16)
    c, l0 = c16 // 2, 16 * (c16 % 2)
    return [32 * j + l0 + i for j in (2 * c, 2 * c + 1) for i in range(16)], values


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
         "test_ch11c_3_fragment_words": {"every-word": {"fragment_words": _every_word}},
         "test_ch11c_4_q6_kp_lane": {"q4_k-lanes": {"q6_kp_lane": _q4_k_lanes}}}
