"""Dequantization: bit-exact against gguf-py's `gguf.quants.dequantize` for every format tffedu
runs, on random blocks with normal, extreme and non-finite float16 scales."""
import zlib

import gguf
import numpy as np
import pytest
from gguf import GGMLQuantizationType as Q

from tffedu.errors import GGUFError
from tffedu.quant import DEQUANTIZE, GGML_TYPES, block_format, dequantize
from gguf_util import random_blocks

TYPES = ["F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q6_K"]


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
    with pytest.raises(GGUFError, match="Q2_K is not implemented"):
        dequantize(np.zeros(84, np.uint8), "Q2_K")
    with pytest.raises(GGUFError, match="unknown ggml type"):
        block_format(99)
    assert block_format("q4_k").type_size == 144 and block_format(8).name == "Q8_0"
