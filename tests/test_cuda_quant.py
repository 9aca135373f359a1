"""Chapter 11a: the GGUF block formats besides Q8_0 on the GPU (tffedu.ops.cuda_quant).

CPU tests check the weight table's rows against gguf-py's block sizes and the reference against
gguf-py's dequantization. GPU tests check the GEMV (every format, batch 1..8, each epilogue, the
packed int8 activations), the fp16 dequantization and the embedding lookup against numpy: the
values bit for bit against chapter 03a (itself bit-exact against gguf-py), the GEMV against its own
arithmetic in float64, outputs poisoned with NaN so an unwritten element fails.
"""
import gguf
import numpy as np
import pytest
from gguf import GGMLQuantizationType as QT

from tffedu.errors import ShapeError
from tffedu.ops import cuda_matmul as cm
from tffedu.ops import cuda_quant as cq
from tffedu.quant import dequantize, quantize

TYPES = list(cq.QUANT_TYPES)


def weights(wk: str, N: int, K: int, seed: int) -> np.ndarray:
    "Raw `wk` rows of random weights, with an all-zero row and an outlier row."
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((N, K)) * 0.05).astype(np.float32)
    w[0] = 0.0
    if N > 2:
        w[2, : K // 2] *= 30
    return quantize(w, wk)


# ------------------------------------------------------------------ CPU
def test_the_rows_are_gguf_py_block_sizes():
    for wk in TYPES:
        row = cm.GPU_WEIGHTS[wk]
        assert (row.block, row.block_bytes) == gguf.GGML_QUANT_SIZES[QT[wk]]
        assert row.gemv.packed_i8 and row.gemv.max_rows == cq.GEMV_MAX_ROWS
        assert row.get_rows[:2] == ("gemv_quant.cu", "get_rows_quant")
        assert row.get_rows[2]["WTYPE"] == QT[wk].value


@pytest.mark.parametrize("wk", TYPES)
def test_reference_is_the_quantized_product(wk):
    "quant_gemv_ref = (x rounded to int8 blocks as the kernel does) @ (gguf-py's dequantization).T."
    K = 512
    raw = weights(wk, 5, K, 1)
    x = np.random.default_rng(2).standard_normal((3, K)).astype(np.float32)
    xq, xd = cm.quantize_act_ref(x)
    xs = (xq.reshape(3, -1, 32) * xd[..., None].astype(np.float64)).reshape(3, K)
    want = xs @ gguf.quants.dequantize(raw, QT[wk]).astype(np.float64).T
    np.testing.assert_allclose(cq.quant_gemv_ref(x, raw, wk, K), want, rtol=1e-12, atol=1e-12)


def test_slab_rows():
    "The prefill slabs are chapter 11's (one size of slab for every format)."
    assert cm.q8_0_slab_rows(12288, 4096) == min(12288, cm.DEQUANT_SLAB_BYTES // (2 * 4096) // 128 * 128)
    assert cm.q8_0_slab_rows(5, 256) == 5 and cm.q8_0_slab_rows(10 ** 6, 10 ** 6) == 128


# ------------------------------------------------------------------ GPU
def _ga():
    import pycuda.gpuarray as ga
    from tffedu.ops.cuda import context
    context()
    return ga


def _nan(ga, shape, dtype=np.float32):
    return ga.to_gpu(np.full(shape, np.nan, dtype))


@pytest.mark.gpu
@pytest.mark.parametrize("wk", TYPES)
@pytest.mark.parametrize("N,K", [(1, 256), (37, 1280), (203, 4096)])
@pytest.mark.parametrize("T", [1, 3, 8])
def test_gemv_every_format(wk, N, K, T):
    ga = _ga()
    raw = weights(wk, N, K, N + K + T)
    x = np.random.default_rng(T).standard_normal((T, K)).astype(np.float32)
    y = _nan(ga, (T, N))
    cq.quant_gemv(ga.to_gpu(raw), wk, ga.to_gpu(x), y, N, K, T)
    assert cm.relerr(y.get(), cq.quant_gemv_ref(x, raw, wk, K)) < 1e-5


@pytest.mark.gpu
@pytest.mark.parametrize("wk", TYPES)
@pytest.mark.parametrize("cfg", [None, (1, 8, 2), (4, 2, 4), (2, 4, 3)])
def test_gemv_epilogues_and_packed_activations(wk, cfg):
    """res, w2 (SwiGLU) and cat against numpy, and bit for bit against the unfused launches; packed
    int8 activations from rmsnorm_q8 give what quantizing rmsnorm's output gives."""
    ga = _ga()
    from tffedu.factory import OPS
    N, K, T = 203, 1280, 3
    kw = dict(zip(("rows", "warps", "stages"), cfg)) if cfg else {}
    raw, raw2, raw3 = (weights(wk, n, K, s) for n, s in ((N, 1), (N, 2), (64, 3)))
    rng = np.random.default_rng(4)
    x, r = rng.standard_normal((T, K)).astype(np.float32), rng.standard_normal((T, N)).astype(np.float32)
    wd, w2d, w3d, xd, rd = (ga.to_gpu(a) for a in (raw, raw2, raw3, x, r))
    g_ref, u_ref = cq.quant_gemv_ref(x, raw, wk, K), cq.quant_gemv_ref(x, raw2, wk, K)
    plain, plain2, y = _nan(ga, (T, N)), _nan(ga, (T, N)), _nan(ga, (T, N))
    cq.quant_gemv(wd, wk, xd, plain, N, K, T, **kw)
    cq.quant_gemv(w2d, wk, xd, plain2, N, K, T, **kw)
    cq.quant_gemv(wd, wk, xd, y, N, K, T, res=rd, **kw)
    assert np.array_equal(y.get(), r + plain.get())
    y.fill(np.float32(np.nan))
    cq.quant_gemv(wd, wk, xd, y, N, K, T, w2=w2d, **kw)
    assert cm.relerr(y.get(), g_ref / (1 + np.exp(-g_ref)) * u_ref) < 1e-5
    assert np.array_equal(y.get(), OPS.get("swiglu", "cuda")(plain, plain2).get())
    cat = _nan(ga, (T * (N + 64),))
    cq.quant_gemv(wd, wk, xd, cat, N, K, T, cat=[(w3d, 64)], **kw)
    got = cat.get()
    assert np.array_equal(got[: T * N].reshape(T, N), plain.get())
    assert cm.relerr(got[T * N:].reshape(T, 64), cq.quant_gemv_ref(x, raw3, wk, K)) < 1e-5
    # packed activations: rmsnorm_q8's bytes through the matmul_q8 op
    nw = ga.to_gpu((1 + 0.1 * rng.standard_normal(K)).astype(np.float32))
    packed = OPS.get("rmsnorm_q8", "cuda")(xd, nw, eps=1e-6)
    normed = OPS.get("rmsnorm", "cuda")(xd, nw, eps=1e-6)
    want = _nan(ga, (T, N))
    cq.quant_gemv(wd, wk, normed, want, N, K, T, **kw)
    got = OPS.get("matmul_q8", "cuda")(packed, wd, w_dtype=wk).get()
    assert np.array_equal(got, want.get())


@pytest.mark.gpu
@pytest.mark.parametrize("wk", TYPES)
def test_matmul_op_at_every_batch(wk):
    """The matmul op through the weight table: the GEMV up to 8 rows, slabs of dequantized rows
    through the tensor cores above (fp16 activations: a loose tolerance against float64)."""
    ga = _ga()
    from tffedu.factory import OPS
    N, K = 300, 1536
    raw = weights(wk, N, K, 5)
    w64 = dequantize(raw, wk, (N, K)).astype(np.float64)
    for T in (1, 8, 9, 77):
        x = np.random.default_rng(T).standard_normal((T, K)).astype(np.float32)
        y = OPS.get("matmul", "cuda")(ga.to_gpu(x), ga.to_gpu(raw), w_dtype=wk).get()
        tol = 1e-5 if T <= 8 else 2e-3
        ref = cq.quant_gemv_ref(x, raw, wk, K) if T <= 8 else x.astype(np.float64) @ w64.T
        assert cm.relerr(y, ref) < tol, T


@pytest.mark.gpu
@pytest.mark.parametrize("wk", TYPES)
def test_dequant_and_embedding_are_chapter_03a_bit_for_bit(wk):
    ga = _ga()
    from tffedu.factory import OPS
    N, K = 77, 1024
    raw = weights(wk, N, K, 6)
    ref = dequantize(raw, wk, (N, K))
    out = _nan(ga, (N, K), np.float16)
    cq.dequant_f16(ga.to_gpu(raw), wk, out, N, K)
    assert np.array_equal(out.get().view(np.uint16), ref.astype(np.float16).view(np.uint16))
    ids = np.array([3, 0, 76, 3, -1, 77], np.int32)               # repeats, the ends, two bad ids
    from tffedu.tensor import DTYPES, Tensor
    table = Tensor.from_buffer(np.ascontiguousarray(raw), DTYPES[wk], (N, K)).to("cuda")
    got = OPS.get("get_rows", "cuda")(table, ga.to_gpu(ids)).to("cpu").numpy()
    assert np.array_equal(got[:4].view(np.uint32), ref[ids[:4]].view(np.uint32))
    assert np.isnan(got[4:]).all()


@pytest.mark.gpu
def test_errors_name_the_problem():
    ga = _ga()
    w, x, y = ga.zeros((4, 144), np.uint8), ga.zeros((1, 256), np.float32), ga.zeros((1, 4), np.float32)
    with pytest.raises(ShapeError, match="K % 256"):
        cq.quant_gemv(w, "Q4_K", x, y, 4, 250, 1)
    with pytest.raises(ShapeError, match="1..8 rows"):
        cq.quant_gemv(w, "Q4_K", x, y, 4, 256, 9)
    with pytest.raises(ShapeError, match="reads Q4_0"):
        cq.quant_gemv(w, "Q8_0", x, y, 4, 256, 1)
    with pytest.raises(ShapeError, match="one epilogue"):
        cq.quant_gemv(w, "Q4_K", x, y, 4, 256, 1, res=y, w2=w)
