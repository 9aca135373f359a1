"""CPU ops (chapter 07) against references we did not write: torch, HF transformers' RoPE, gguf-py."""
import gc

import gguf
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from gguf import GGMLQuantizationType as QT
from hypothesis import given, settings, strategies as st

from tffedu.errors import ShapeError
from tffedu.factory import OPS
from tffedu.ops import cpu

rng = np.random.default_rng(1234)


def op(name):
    return OPS.get(name, "cpu")


def rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.abs(a - b).max() / np.abs(b).max())


def randn(*shape, scale=1.0):
    return (scale * rng.standard_normal(shape)).astype(np.float32)


def as_weight(w32: np.ndarray, qtype):
    "(tffedu Tensor holding w32 quantized by gguf-py, gguf-py's dequantization of it)."
    if qtype in K_SCALES:              # gguf-py cannot quantize k-quants: random blocks instead
        raw = random_blocks(w32.shape, qtype)
    else:
        raw = gguf.quants.quantize(w32, qtype)
    ref = gguf.quants.dequantize(raw, qtype).reshape(w32.shape).astype(np.float32)
    from tffedu.tensor import Tensor, dtype_from_ggml
    return Tensor.from_buffer(np.ascontiguousarray(raw), dtype_from_ggml(int(qtype)), w32.shape), ref


K_SCALES = {QT.Q4_K: (0, 2), QT.Q6_K: (208,)}   # byte offsets of the float16 scales in a block


def random_blocks(shape, qtype):
    "Random bytes of a k-quant tensor whose float16 scales are small finite numbers."
    bs, ts = gguf.GGML_QUANT_SIZES[qtype]
    n_blocks = shape[0] * shape[1] // bs
    raw = rng.integers(0, 256, (n_blocks, ts), dtype=np.uint8)
    for off in K_SCALES[qtype]:
        raw[:, off:off + 2] = (0.01 * rng.random((n_blocks, 1))).astype(np.float16).view(np.uint8)
    return raw.reshape(shape[0], -1)


QTYPES = [QT.F32, QT.F16, QT.BF16, QT.Q8_0, QT.Q4_0, QT.Q4_1, QT.Q5_0, QT.Q5_1, QT.Q4_K, QT.Q6_K]


# ----------------------------------------------------------------------------- get_rows
@pytest.mark.parametrize("qtype", QTYPES, ids=lambda q: q.name)
def test_get_rows_matches_gguf_py(qtype):
    table = randn(40, 256)
    w, ref = as_weight(table, qtype)
    ids = np.array([7, 0, 39, 7, 12], np.int32)
    got = op("get_rows")(w, ids)
    assert got.dtype == np.float32 and got.shape == (5, 256)
    np.testing.assert_array_equal(got, ref[ids])


def test_get_rows_numpy_tables_and_out_buffer():
    t32 = randn(10, 8)
    ids = np.array([3, 3, 9], np.int32)
    out = np.empty((3, 8), np.float32)
    assert op("get_rows")(t32, ids, out=out) is out
    np.testing.assert_array_equal(out, t32[ids])
    t16 = t32.astype(np.float16)
    np.testing.assert_array_equal(op("get_rows")(t16, ids), t16[ids].astype(np.float32))


def test_get_rows_rejects_ids_outside_vocab():
    with pytest.raises(ShapeError, match="token id 10"):
        op("get_rows")(randn(10, 4), np.array([1, 10]))


# ----------------------------------------------------------------------------- rmsnorm
@pytest.mark.parametrize("shape", [(7, 64), (5, 4, 16), (1, 96)])
def test_rmsnorm_matches_torch(shape):
    x, w = randn(*shape, scale=3.0), randn(shape[-1])
    ref = F.rms_norm(torch.from_numpy(x), (shape[-1],), torch.from_numpy(w), eps=1e-5).numpy()
    assert rel(op("rmsnorm")(x, w, eps=1e-5), ref) < 1e-6
    ref_nw = F.rms_norm(torch.from_numpy(x), (shape[-1],), eps=1e-5).numpy()
    assert rel(op("rmsnorm")(x, eps=1e-5), ref_nw) < 1e-6


def test_rmsnorm_weight_shape_error():
    with pytest.raises(ShapeError, match="rmsnorm weight"):
        op("rmsnorm")(randn(2, 8), randn(7))


# ----------------------------------------------------------------------------- matmul
@pytest.mark.parametrize("qtype", QTYPES, ids=lambda q: q.name)
@pytest.mark.parametrize("T", [1, 5])
def test_matmul_quantized_weights(qtype, T):
    w32 = randn(48, 256)
    w, deq = as_weight(w32, qtype)
    x = randn(T, 256)
    ref = (torch.from_numpy(x).double() @ torch.from_numpy(deq).double().T).numpy()
    got = op("matmul")(x, w)
    assert got.shape == (T, 48) and got.dtype == np.float32
    assert rel(got, ref) < 1e-5


def test_matmul_numpy_f16_and_out():
    w16 = randn(12, 32).astype(np.float16)
    x = randn(3, 32)
    out = np.zeros((3, 12), np.float32)
    assert op("matmul")(x, w16, out=out) is out
    ref = (torch.from_numpy(x).double() @ torch.from_numpy(w16.astype(np.float64)).T).numpy()
    assert rel(out, ref) < 1e-5


def test_matmul_shape_errors():
    with pytest.raises(ShapeError, match="matmul"):
        op("matmul")(randn(2, 8), randn(4, 9))
    with pytest.raises(ShapeError, match="output buffer"):
        op("matmul")(randn(2, 8), randn(4, 8), out=np.empty((2, 5), np.float32))


def test_dequantized_weight_is_cached_and_released():
    w, _ = as_weight(randn(16, 64), QT.Q8_0)
    a = cpu.as_f32(w)
    assert cpu.as_f32(w) is a           # second use: no new dequantization
    key = id(w)
    assert key in cpu._F32_CACHE
    del w, a
    gc.collect()
    assert key not in cpu._F32_CACHE    # the entry dies with the weight


# ----------------------------------------------------------------------------- rope
def hf_rope(x, pos, theta, n_dims=None):
    "HF transformers' rotate-half RoPE (Qwen3's apply_rotary_pos_emb) on x [T, H, hd]."
    from transformers.models.qwen3.modeling_qwen3 import apply_rotary_pos_emb
    T, H, hd = x.shape
    n = n_dims or hd
    inv = 1.0 / theta ** (torch.arange(0, n, 2, dtype=torch.float64) / n)
    fr = torch.outer(torch.as_tensor(pos, dtype=torch.float64), inv)
    emb = torch.cat([fr, fr], -1)
    xt = torch.from_numpy(x[..., :n]).double().transpose(0, 1)[None]     # [1, H, T, n]
    r, _ = apply_rotary_pos_emb(xt, xt, emb.cos()[None], emb.sin()[None])
    out = x.astype(np.float64).copy()
    out[..., :n] = r[0].transpose(0, 1).numpy()
    return out


def llama_perm(hd):
    "The row permutation llama.cpp's convert_hf_to_gguf.py applies to one head of Q/K."
    return np.arange(hd).reshape(2, hd // 2).T.reshape(-1)


@pytest.mark.parametrize("theta", [10000.0, 1e6])
@pytest.mark.parametrize("hd", [16, 64, 128])
def test_rope_neox_matches_hf(theta, hd):
    x = randn(9, 3, hd)
    pos = np.array([0, 1, 2, 3, 4, 100, 101, 500, 2047], np.int32)
    assert rel(op("rope")(x, pos, theta=theta, mode="neox"), hf_rope(x, pos, theta)) < 1e-5


@pytest.mark.parametrize("hd", [16, 64])
def test_rope_norm_on_permuted_rows_matches_hf(hd):
    x = randn(6, 2, hd)
    pos = np.arange(20, 26, dtype=np.int32)
    p = llama_perm(hd)
    got = op("rope")(x[..., p], pos, theta=10000.0, mode="norm")
    assert rel(got, hf_rope(x, pos, 10000.0)[..., p]) < 1e-5


def test_rope_partial_dims_and_in_place():
    x = randn(4, 2, 32)
    pos = np.arange(4, dtype=np.int32)
    ref = hf_rope(x, pos, 10000.0, n_dims=16)
    assert rel(op("rope")(x, pos, mode="neox", n_dims=16), ref) < 1e-5
    y = x.copy()
    op("rope")(y, pos, out=y, mode="neox")                     # the runtime may alias out and x
    assert rel(y, hf_rope(x, pos, 10000.0)) < 1e-5


def test_rope_bad_mode():
    with pytest.raises(ShapeError, match="mode"):
        op("rope")(randn(1, 1, 8), np.zeros(1, np.int32), mode="gptj")


# ----------------------------------------------------------------------------- attention
def torch_attention(q, k, v):
    "Causal GQA attention of full sequences with torch's own grouping (enable_gqa)."
    t = lambda a: torch.from_numpy(a).double().transpose(0, 1)[None]  # noqa: E731
    o = F.scaled_dot_product_attention(t(q), t(k), t(v), is_causal=True, enable_gqa=True)
    return o[0].transpose(0, 1).numpy()


@pytest.mark.parametrize("Hq,Hkv,hd", [(4, 4, 16), (8, 2, 16), (8, 1, 32), (6, 3, 64)])
def test_attention_prefill_then_decode(Hq, Hkv, hd):
    S = 11
    q, k, v = randn(S, Hq, hd), randn(S, Hkv, hd), randn(S, Hkv, hd)
    ref = torch_attention(q, k, v)
    cache = np.zeros((2, 32, Hkv, hd), np.float32)
    got = [op("attention")(q[:7], k[:7], v[:7], cache, np.arange(7, dtype=np.int32))]
    for p in range(7, S):                                      # one token at a time
        got.append(op("attention")(q[p:p + 1], k[p:p + 1], v[p:p + 1], cache,
                                   np.array([p], np.int32)))
    assert rel(np.concatenate(got), ref) < 1e-5
    np.testing.assert_array_equal(cache[0, :S], k)             # the op stored the keys
    np.testing.assert_array_equal(cache[1, :S], v)


def test_attention_without_cache_and_scale():
    q, k, v = randn(5, 4, 8), randn(5, 2, 8), randn(5, 2, 8)
    assert rel(op("attention")(q, k, v), torch_attention(q, k, v)) < 1e-5
    t = lambda a: torch.from_numpy(a).double().transpose(0, 1)[None]  # noqa: E731
    ref = F.scaled_dot_product_attention(t(q), t(k), t(v), is_causal=True, enable_gqa=True,
                                         scale=0.5)[0].transpose(0, 1).numpy()
    assert rel(op("attention")(q, k, v, scale=0.5), ref) < 1e-5


def test_attention_errors():
    with pytest.raises(ShapeError, match="multiple"):
        op("attention")(randn(1, 3, 8), randn(1, 2, 8), randn(1, 2, 8))
    with pytest.raises(ShapeError, match="past the KV cache"):
        op("attention")(randn(1, 2, 8), randn(1, 2, 8), randn(1, 2, 8),
                        np.zeros((2, 4, 2, 8), np.float32), np.array([4], np.int32))


# ----------------------------------------------------------------------------- small ops
def test_swiglu_silu_add_mul():
    g, u = randn(4, 24, scale=4), randn(4, 24)
    tg, tu = torch.from_numpy(g), torch.from_numpy(u)
    assert rel(op("silu")(g), F.silu(tg).numpy()) < 1e-6
    assert rel(op("swiglu")(g, u), (F.silu(tg) * tu).numpy()) < 1e-6
    b = randn(24)
    np.testing.assert_array_equal(op("add")(g, u), (tg + tu).numpy())
    np.testing.assert_array_equal(op("mul")(g, b), (tg * torch.from_numpy(b)).numpy())


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 4), st.integers(1, 300), st.floats(0.1, 200.0))
def test_softmax_and_argmax_match_torch(rows, cols, scale):
    x = randn(rows, cols, scale=scale)
    ref = torch.softmax(torch.from_numpy(x).double(), -1).numpy()
    assert np.abs(op("softmax")(x) - ref).max() < 1e-6
    np.testing.assert_array_equal(op("argmax")(x), torch.from_numpy(x).argmax(-1).numpy())


def test_argmax_ties_pick_first():
    x = np.array([[1.0, 3.0, 3.0, 0.0]], np.float32)
    assert op("argmax")(x).tolist() == [1] and op("argmax")(x).dtype == np.int32


def test_rope_freq_factors_must_be_positive_numbers():
    "Llama 3.1's per-pair factors, given to the op directly: a bad table is a ShapeError, not NaN angles."
    x, pos = np.ones((2, 1, 8), np.float32), np.array([0, 5], np.int32)
    for bad in ((1.0, 2.0, 0.0, 1.0), (1.0, float("nan"), 1.0, 1.0), (1.0, "x", 1.0, 1.0), (1.0,) * 3):
        with pytest.raises(ShapeError, match="rope: .*freq_factors"):
            op("rope")(x, pos, freq_factors=bad)
