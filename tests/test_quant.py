"""Dequantization: bit-exact against gguf-py's `gguf.quants.dequantize` for every format tffedu
runs, on random blocks with normal, extreme and non-finite float16 scales. Quantization: the same
bytes as gguf-py's quantizers where it has one; K-quant blocks built by hand from ggml's layout
come back byte for byte, and the error is what the bits allow."""
import zlib

import gguf
import numpy as np
import pytest
from gguf import GGMLQuantizationType as Q

from tffedu.errors import GGUFError
from tffedu.quant import BY_GGUF_PY, DEQUANTIZE, GGML_TYPES, QUANTIZE, block_format, dequantize, quantize
from gguf_util import random_blocks

TYPES = ["F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K",
         "Q2_K", "Q3_K", "IQ4_NL", "IQ4_XS"]   # unpacked by hand in chapter 03a


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    "Equal as float32 bit patterns (so -0.0 != 0.0, and nan must be the same nan)."
    return a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))


@pytest.mark.parametrize("scales", ["normal", "extreme", "nonfinite"])
@pytest.mark.parametrize("qtype", TYPES)
def test_dequantize_matches_gguf_py(qtype, scales):
    rng = np.random.default_rng(zlib.crc32(f"{qtype}/{scales}".encode()))
    blocks = random_blocks(qtype, 4096, rng, scales)
    ref = gguf.quants.dequantize(blocks, Q[qtype])                  # (n, block_size)
    with np.errstate(all="ignore"):
        ours = dequantize(blocks, qtype, ref.shape)
    assert ours.dtype == np.float32
    if scales == "nonfinite" and qtype not in ("F16", "BF16"):
        assert np.isnan(ref).any() and np.isinf(ref).any()        # the case is really exercised
    assert same_bits(ours, ref)


@pytest.mark.parametrize("qtype", TYPES)
def test_dequantize_rows_reshape(qtype):
    "A 3-D tensor (numpy order) dequantizes row by row like gguf-py's byte-shaped input."
    block_size, type_size = gguf.GGML_QUANT_SIZES[Q[qtype]]
    rng = np.random.default_rng(1)
    shape = (2, 3, 2 * 256)   # the row length is a multiple of every block size
    raw = random_blocks(qtype, 2 * 3 * 2 * 256 // block_size, rng).reshape(2, 3, -1)
    ref = gguf.quants.dequantize(raw, Q[qtype])
    assert ref.shape == shape
    with np.errstate(all="ignore"):
        assert same_bits(dequantize(raw, qtype, shape), ref)


def test_q4_0_by_hand():
    "One Q4_0 block written by hand from the ggml layout: d=0.5, element i in nibble i%16."
    d = np.array([0.5], np.float16).tobytes()
    codes = np.arange(32) % 16                     # q values; y = d * (q - 8)
    qs = (codes[:16] | (codes[16:] << 4)).astype(np.uint8).tobytes()
    y = dequantize(np.frombuffer(d + qs, np.uint8), "Q4_0")
    np.testing.assert_array_equal(y, 0.5 * (codes - 8))


def test_block_table_matches_gguf_py():
    for t in GGML_TYPES.values():
        ref = Q(t.ggml_id)
        assert ref.name == t.name
        assert gguf.GGML_QUANT_SIZES[ref] == (t.block_size, t.type_size)
    assert set(DEQUANTIZE) >= set(TYPES) | {"F32"}


def test_errors_name_the_problem():
    with pytest.raises(GGUFError, match="whole number of Q8_0 blocks"):
        dequantize(np.zeros(35, np.uint8), "Q8_0")
    with pytest.raises(GGUFError, match="shape"):
        dequantize(np.zeros(34, np.uint8), "Q8_0", (2, 32))
    with pytest.raises(GGUFError, match="Q8_K is not implemented"):     # llama.cpp's activation format
        dequantize(np.zeros(292, np.uint8), "Q8_K")
    with pytest.raises(GGUFError, match="unknown ggml type"):
        block_format(99)
    assert block_format("q4_k").type_size == 144 and block_format(8).name == "Q8_0"


def test_every_format_gguf_py_reads_is_one_we_read():
    """A file may hold any ggml type: the ones gguf-py can dequantize, we dequantize too (those we do
    not unpack by hand through gguf-py itself: this checks the plumbing, 3-D rows included)."""
    def gguf_py_reads(t) -> bool:
        try:
            gguf.quants.dequantize(np.zeros(t.type_size, np.uint8), Q(t.ggml_id))
            return t.block_size > 1 or t.name in ("F32", "F16", "BF16")   # not the integer types
        except NotImplementedError:
            return False
    readable = {t.name for t in GGML_TYPES.values() if gguf_py_reads(t)}
    assert readable <= set(DEQUANTIZE) and set(BY_GGUF_PY) <= readable
    rng = np.random.default_rng(11)
    for qtype in BY_GGUF_PY:
        block_size, type_size = gguf.GGML_QUANT_SIZES[Q[qtype]]
        raw = rng.integers(0, 256, (2, 3, 512 // block_size * type_size), dtype=np.uint8)
        raw[..., :2] = np.frombuffer(np.float16(0.01).tobytes(), np.uint8)   # a finite first field
        with np.errstate(all="ignore"):
            ref = gguf.quants.dequantize(raw, Q[qtype])
            assert same_bits(dequantize(raw, qtype, (2, 3, 512)), ref)


def test_a_gguf_py_without_the_format_is_named(monkeypatch):
    "An older gguf-py than the file's format: a GGUFError that says so, not its NotImplementedError."
    def older(data, qtype):
        raise NotImplementedError(f"Dequantization for {qtype.name} is not yet implemented")
    monkeypatch.setattr(gguf.quants, "dequantize", older)
    with pytest.raises(GGUFError, match="gguf-py cannot dequantize IQ2_XXS"):
        dequantize(np.zeros(66, np.uint8), "IQ2_XXS")


LEGACY = ["F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1"]
K_QUANTS = ["Q4_K", "Q5_K", "Q6_K"]


def awkward_rows(rng, rows: int, K: int) -> np.ndarray:
    """Gaussian rows with the blocks quantizers trip on: all zero, constant, one-signed, a single
    outlier, values exactly on the halves of a Q8_0/Q4_0 step, subnormal and huge magnitudes."""
    x = (rng.standard_normal((rows, K)) * 0.05).astype(np.float32)
    x[0] = 0.0
    x[1, :64] = 0.25
    x[2, :256] = np.abs(x[2, :256])
    x[3, :256] = -np.abs(x[3, :256])
    x[4, :32] = 0.0; x[4, 7] = 3.0
    x[5, :32] = np.arange(-16, 16) / 16 * 127 / 8     # q8_0 codes land on .5 before rounding
    x[6, :256] *= 1e-6
    x[7, :256] *= 1e4
    return x


@pytest.mark.parametrize("qtype", LEGACY)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_quantize_matches_gguf_py(qtype, seed):
    x = awkward_rows(np.random.default_rng(seed), 16, 512)
    ref = gguf.quants.quantize(x, Q[qtype])
    ours = quantize(x, qtype)
    assert ours.dtype == np.uint8 and ours.shape == (16, ref.nbytes // 16)
    assert np.array_equal(ours, ref.view(np.uint8).reshape(ours.shape))


def q4_k_block(rng, d, dmin, sc, mn, q) -> bytes:
    "One Q4_K block written from ggml's layout (ggml-common.h: block_q4_K) by plain byte arithmetic."
    s = [0] * 12
    for j in range(8):
        if j < 4:
            s[j], s[j + 4] = sc[j], mn[j]
        else:
            s[j + 4] = (sc[j] & 0xF) | ((mn[j] & 0xF) << 4)
            s[j - 4] |= (sc[j] >> 4) << 6
            s[j] |= (mn[j] >> 4) << 6
    qs = [q[64 * c + l] | (q[64 * c + 32 + l] << 4) for c in range(4) for l in range(32)]
    return np.float16(d).tobytes() + np.float16(dmin).tobytes() + bytes(s) + bytes(qs)


def q6_k_block(d, sc, q) -> bytes:
    "One Q6_K block from ggml's layout (block_q6_K): codes q in 0..63 (value d * sc * (q - 32))."
    ql, qh = [0] * 128, [0] * 64
    for h in range(2):
        for l in range(32):
            a, b, c, e = (q[128 * h + l + 32 * k] for k in range(4))
            ql[64 * h + l] = (a & 0xF) | ((c & 0xF) << 4)
            ql[64 * h + 32 + l] = (b & 0xF) | ((e & 0xF) << 4)
            qh[32 * h + l] = (a >> 4) | ((b >> 4) << 2) | ((c >> 4) << 4) | ((e >> 4) << 6)
    return bytes(ql) + bytes(qh) + np.array(sc, np.int8).tobytes() + np.float16(d).tobytes()


def test_q4_k_representable_block_comes_back_byte_for_byte():
    """Weights a Q4_K block can hold exactly (largest sub-scale and sub-minimum 63, every sub-block
    using codes 0 and 15): quantizing them must find that very block."""
    rng = np.random.default_rng(7)
    for _ in range(20):
        sc, mn = rng.integers(1, 64, 8), rng.integers(0, 64, 8)
        sc[rng.integers(8)], mn[rng.integers(8)] = 63, 63
        q = rng.integers(0, 16, 256)
        q[0::32], q[1::32] = 0, 15
        raw = np.frombuffer(q4_k_block(rng, 2.0 ** -9, 2.0 ** -10, sc, mn, q), np.uint8)
        x = gguf.quants.dequantize(raw, Q.Q4_K).reshape(1, 256)      # the weights, by gguf-py
        assert np.array_equal(quantize(x, "Q4_K")[0], raw)


def test_q6_k_representable_block_comes_back_byte_for_byte():
    rng = np.random.default_rng(8)
    for _ in range(20):
        sc = rng.integers(-127, 128, 16)
        sc[sc == 0] = 1
        sc[rng.integers(16)] = -128                                   # the largest, as ggml stores it
        q = rng.integers(0, 64, 256)
        q[0::16] = 0                                                  # code -32 in every sub-block
        raw = np.frombuffer(q6_k_block(2.0 ** -12, sc, q), np.uint8)
        x = gguf.quants.dequantize(raw, Q.Q6_K).reshape(1, 256)
        assert np.array_equal(quantize(x, "Q6_K")[0], raw)


@pytest.mark.parametrize("qtype, peer", [("Q4_K", "Q4_1"), ("Q5_K", "Q5_1"), ("Q6_K", "Q8_0")])
def test_k_quants_error_is_what_the_bits_allow(qtype, peer):
    """gguf-py reads our K-quant bytes as we do; a K-quant's error on gaussian weights is below the
    32-weight format with as many code bits (Q6_K: between Q5_1 and Q8_0), and awkward blocks stay
    finite and exact where they are zero."""
    x = awkward_rows(np.random.default_rng(3), 32, 1024)
    raw = quantize(x, qtype)
    back = dequantize(raw, qtype, x.shape)
    assert np.array_equal(back, gguf.quants.dequantize(raw, Q[qtype]))
    assert np.isfinite(back).all() and not back[0].any()
    g = x[8:]                                                         # the gaussian rows
    rel = lambda t: np.sqrt(((dequantize(quantize(g, t), t, g.shape) - g) ** 2).mean()) / g.std()
    assert rel(qtype) < rel(peer) if peer != "Q8_0" else rel("Q5_1") > rel(qtype) > rel(peer)


@pytest.mark.parametrize("qtype", sorted(QUANTIZE))
def test_quantize_shapes(qtype):
    fmt = block_format(qtype)
    x = np.random.default_rng(4).standard_normal((2, 3, 512)).astype(np.float16)   # any float dtype
    raw = quantize(x, qtype)
    assert raw.shape == (2, 3, 512 // fmt.block_size * fmt.type_size)
    assert quantize(np.zeros((0, 512), np.float32), qtype).shape == (0, raw.shape[-1])
    back = dequantize(raw, qtype, x.shape)
    assert np.abs(back - x).max() < 0.2 * np.abs(x).max()


def test_quantize_errors_name_the_problem():
    with pytest.raises(GGUFError, match="not whole Q4_K blocks of 256"):
        quantize(np.zeros((2, 96), np.float32), "Q4_K")
    with pytest.raises(GGUFError, match="nan or inf"):
        quantize(np.array([[np.nan] * 32], np.float32), "Q8_0")
    with pytest.raises(GGUFError, match="float rows"):
        quantize(np.zeros((1, 32), np.int32), "Q8_0")
    with pytest.raises(GGUFError, match="float rows"):
        quantize(np.float32(1), "Q8_0")
    with pytest.raises(GGUFError, match="quantization to Q2_K is not implemented"):
        quantize(np.zeros((1, 256), np.float32), "Q2_K")
    with pytest.raises(GGUFError, match="unknown ggml type"):
        quantize(np.zeros((1, 32), np.float32), "Q9_9")
