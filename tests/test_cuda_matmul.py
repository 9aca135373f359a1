"""Chapter 11 and its parts 11a, 11b: the matmul ladder and the Q8_0 GEMV (tffedu.ops.cuda_gemm),
Q8_0 on the tensor cores (tffedu.ops.cuda_q8_gemm) and the matmul op (tffedu.ops.cuda_matmul).

CPU tests check the numpy references against gguf-py (the real Q8_0 format) and numpy's matmul;
GPU tests (marked gpu, run on the GPU machine) check every kernel version against those references
on random odd shapes, with the output poisoned by NaN so an unwritten element fails.
"""
import numpy as np
import pytest

import gguf
from gguf.quants import dequantize, quantize

from tffedu.errors import DeviceError, ShapeError
from tffedu.ops import cuda_gemm as gm
from tffedu.ops import cuda_q8_gemm as qm
from tffedu.ops import cuda_matmul as cm

Q8 = gguf.GGMLQuantizationType.Q8_0


def q8(w):
    return quantize(np.ascontiguousarray(w, np.float32), Q8)


# ------------------------------------------------------------------ CPU: the references
@pytest.mark.parametrize("N,K,T", [(1, 32, 1), (7, 96, 3), (33, 4128, 8)])
def test_q8_0_gemv_ref_matches_gguf_dequantize(N, K, T):
    rng = np.random.default_rng(N * K + T)
    raw = q8(rng.standard_normal((N, K), dtype=np.float32))
    x = rng.standard_normal((T, K), dtype=np.float32)
    want = x.astype(np.float64) @ dequantize(raw, Q8).astype(np.float64).T
    np.testing.assert_allclose(gm.q8_0_gemv_ref(x, raw, K), want, rtol=1e-10, atol=1e-9)


def test_q8_0_unpack_layout():
    rng = np.random.default_rng(1)
    w = rng.standard_normal((5, 64), dtype=np.float32)
    raw = q8(w)
    d, q = gm.q8_0_unpack(raw, 64)
    assert d.shape == (5, 2) and q.shape == (5, 2, 32) and q.dtype == np.int8
    np.testing.assert_array_equal((d[..., None] * q).reshape(5, 64), dequantize(raw, Q8))
    with pytest.raises(ShapeError):
        gm.q8_0_unpack(raw, 65)


def test_quantize_act_ref_roundtrip_and_zero_block():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 128), dtype=np.float32)
    x[1, 32:64] = 0.0                                   # an all-zero block: scale 0, quants 0
    xq, xd = gm.quantize_act_ref(x)
    assert xq.dtype == np.int8 and xd.shape == (3, 4)
    assert xd[1, 1] == 0 and not xq[1, 32:64].any()
    back = (xq.reshape(3, 4, 32) * xd[..., None]).reshape(3, 128)
    # rounding error is at most half a step (d/2) per value
    assert np.all(np.abs(back - x) <= np.repeat(xd, 32, axis=1) / 2 + 1e-7)
    assert np.abs(xq).max() == 127


def test_dp4a_ref_close_to_exact():
    rng = np.random.default_rng(3)
    K, N = 1024, 64
    raw = q8(rng.standard_normal((N, K), dtype=np.float32))
    x = rng.standard_normal((4, K), dtype=np.float32)
    exact = gm.q8_0_gemv_ref(x, raw, K)
    got = gm.q8_0_gemv_dp4a_ref(x, raw, K)
    assert gm.relerr(got, exact) < 2e-2


def test_matmul_ref_and_relerr():
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((3, 5)), rng.standard_normal((7, 5))
    np.testing.assert_allclose(gm.matmul_ref(x, w), x @ w.T)
    with pytest.raises(AssertionError):
        gm.relerr(np.array([np.nan]), np.array([1.0]))


def test_registered_in_op_registry():
    from tffedu.factory import OPS
    assert OPS.get("matmul", "cuda") is cm.matmul


def test_no_gpu_raises_device_error():
    from tests.conftest import gpu_available
    if gpu_available():
        pytest.skip("a GPU is present")
    with pytest.raises(DeviceError):
        gm.context()


def test_q8_gemm_rejects_bad_shapes_before_any_gpu_work():
    "Version 6's launcher checks M, N and K first: a clear ShapeError, on any machine."
    for M, N, K in [(0, 10, 256), (4, 0, 256), (4, 10, 0), (4, 10, 96), (4, 10, -256)]:
        with pytest.raises(ShapeError, match="multiple of 256"):
            qm.q8_gemm_launcher(0, 0, 0, M, N, K)


def test_q8_mmq_rejects_bad_shapes_before_any_gpu_work():
    "The int8 tensor-core GEMM's launcher checks M, N, K and the activation type first."
    for M, N, K in [(0, 10, 256), (4, 0, 256), (4, 10, 0), (4, 10, 96), (4, 10, 300)]:
        with pytest.raises(ShapeError, match="multiple of 256"):
            qm.q8_mmq_launcher(0, 0, 0, M, N, K)
    with pytest.raises(ShapeError, match="F16 or F32"):
        qm.q8_mmq_launcher(0, 0, 0, 4, 10, 256, x_dtype="BF16")


def test_q8_gemm_splits_fill_the_sms_in_whole_waves():
    "The K split: one wave of blocks where the grid is small, never a ragged second wave."
    assert qm.q8_gemm_splits(32, 16, 132) == 4        # 128 blocks, not 160 (two waves)
    assert qm.q8_gemm_splits(8, 16, 132) == 16
    assert qm.q8_gemm_splits(1187, 16, 132) == 1      # the output head: many tiles already
    assert qm.q8_gemm_splits(5, 1, 132) == 1          # one stage cannot be split
    for tiles in range(1, 400, 7):
        for NS in (1, 4, 16, 48):
            s = qm.q8_gemm_splits(tiles, NS, 132)
            assert 1 <= s <= NS and -(-NS // -(-NS // s)) == s     # whole stages per split


# ------------------------------------------------------------------ GPU helpers
def _ga():
    import pycuda.gpuarray as ga
    from tffedu.ops.cuda import context
    context()
    return ga


def _nan(ga, shape):
    return ga.to_gpu(np.full(shape, np.nan, np.float32))


ODD_SHAPES = [(1, 1, 1), (1, 7, 13), (37, 53, 71), (130, 257, 99), (255, 129, 520), (67, 300, 1001)]


# ------------------------------------------------------------------ GPU: fp32 versions 1-3
@pytest.mark.gpu
@pytest.mark.parametrize("version", gm.SGEMM_VERSIONS)
@pytest.mark.parametrize("M,N,K", ODD_SHAPES)
def test_sgemm_versions(version, M, N, K):
    ga = _ga()
    rng = np.random.default_rng(M * 1000 + N + K)
    x = rng.standard_normal((M, K), dtype=np.float32)
    w = rng.standard_normal((N, K), dtype=np.float32)
    y = _nan(ga, (M, N))
    gm.sgemm(ga.to_gpu(x), ga.to_gpu(w), y, M, N, K, version)
    assert gm.relerr(y.get(), gm.matmul_ref(x, w)) < 1e-5


@pytest.mark.gpu
def test_sgemm_tiled_block_sizes():
    ga = _ga()
    rng = np.random.default_rng(5)
    M, N, K = 45, 77, 93
    x = rng.standard_normal((M, K), dtype=np.float32)
    w = rng.standard_normal((N, K), dtype=np.float32)
    for t in (8, 16, 32):
        y = _nan(ga, (M, N))
        gm.sgemm(ga.to_gpu(x), ga.to_gpu(w), y, M, N, K, "tiled", TILE=t)
        assert gm.relerr(y.get(), gm.matmul_ref(x, w)) < 1e-5


# ------------------------------------------------------------------ GPU: tensor cores
def _bf16_bits(a):
    "float32 -> (bf16 bit patterns as uint16, the float32 values they represent)."
    bits = (np.asarray(a, np.float32).view(np.uint32) >> 16).astype(np.uint16)
    return bits, (bits.astype(np.uint32) << 16).view(np.float32)


def _half_inputs(dtype, M, N, K, seed):
    "Random x [M,K], w [N,K] as 16-bit device inputs (xs, ws) and their exact values (xr, wr)."
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((M, K), dtype=np.float32)
    w = rng.standard_normal((N, K), dtype=np.float32)
    if dtype == "F16":
        xs, ws = x.astype(np.float16), w.astype(np.float16)
        return xs, ws, xs, ws
    (xs, xr), (ws, wr) = _bf16_bits(x), _bf16_bits(w)
    return xs, ws, xr, wr


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["F16", "BF16"])
@pytest.mark.parametrize("cfg", range(len(gm.MMA_CONFIGS)))
@pytest.mark.parametrize("M,N,K", [(1, 8, 8), (37, 53, 72), (130, 257, 136), (255, 129, 1000), (300, 260, 64)])
def test_hgemm_configs(dtype, cfg, M, N, K):
    ga = _ga()
    xs, ws, xr, wr = _half_inputs(dtype, M, N, K, seed=M + N * 7 + K * 13 + cfg)
    y = _nan(ga, (M, N))
    gm.hgemm(ga.to_gpu(xs), ga.to_gpu(ws), y, M, N, K, dtype, gm.MMA_CONFIGS[cfg])
    # same 16-bit inputs in float64: only the fp32 accumulation differs
    assert gm.relerr(y.get(), gm.matmul_ref(xr, wr)) < 1e-5


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["F16", "BF16"])
@pytest.mark.parametrize("cfg", range(len(gm.WGMMA_CONFIGS)))
@pytest.mark.parametrize("M,N,K", [(1, 8, 8), (37, 53, 72), (130, 257, 136), (255, 129, 1000), (300, 520, 64),
                                   (129, 385, 4104)])
def test_wgemm_configs(dtype, cfg, M, N, K):
    ga = _ga()
    if not gm.wgmma_available():
        pytest.skip("wgmma needs an sm_90 GPU")
    xs, ws, xr, wr = _half_inputs(dtype, M, N, K, seed=M + N * 7 + K * 13 + cfg + 1)
    y = _nan(ga, (M, N))
    gm.wgemm(ga.to_gpu(xs), ga.to_gpu(ws), y, M, N, K, dtype, gm.WGMMA_CONFIGS[cfg])
    assert gm.relerr(y.get(), gm.matmul_ref(xr, wr)) < 1e-5


@pytest.mark.gpu
def test_wgemm_ldy_column_slice():
    "y with a row stride wider than N: the columns outside [0, N) stay untouched."
    ga = _ga()
    if not gm.wgmma_available():
        pytest.skip("wgmma needs an sm_90 GPU")
    rng = np.random.default_rng(9)
    M, N, K, ldy = 200, 100, 128, 160
    x = rng.standard_normal((M, K), dtype=np.float32).astype(np.float16)
    w = rng.standard_normal((N, K), dtype=np.float32).astype(np.float16)
    y = ga.to_gpu(np.full((M, ldy), 7.0, np.float32))
    gm.wgemm(ga.to_gpu(x), ga.to_gpu(w), y, M, N, K, ldy=ldy)
    got = y.get()
    assert gm.relerr(got[:, :N], gm.matmul_ref(x, w)) < 1e-5
    assert np.all(got[:, N:] == 7.0)


@pytest.mark.gpu
def test_hgemm_rejects_bad_k():
    ga = _ga()
    a = ga.to_gpu(np.zeros((4, 12), np.float16))
    y = ga.to_gpu(np.zeros((4, 4), np.float32))
    with pytest.raises(ShapeError):
        gm.hgemm(a, a, y, 4, 4, 12)
    with pytest.raises(ShapeError):
        gm.wgemm(a, a, y, 4, 4, 12)
    with pytest.raises(ShapeError):
        gm.hgemm(a, a, y, 4, 4, 8, "F32")


# ------------------------------------------------------------------ GPU: Q8_0 GEMV
GEMV_SHAPES = [(1, 32), (37, 96), (300, 4096), (1001, 4128), (129, 12288)]


@pytest.mark.gpu
@pytest.mark.parametrize("N,K", GEMV_SHAPES)
@pytest.mark.parametrize("T", range(1, 9))
def test_q8_0_gemv_versions(N, K, T):
    ga = _ga()
    rng = np.random.default_rng(N * 31 + K + T)
    raw = q8(rng.standard_normal((N, K), dtype=np.float32))
    x = rng.standard_normal((T, K), dtype=np.float32)
    exact = gm.q8_0_gemv_ref(x, raw, K)
    wd, xd = ga.to_gpu(raw), ga.to_gpu(x)
    for version in gm.GEMV_VERSIONS:
        if version == "naive" and T > 3:
            continue
        y = _nan(ga, (T, N))
        gm.q8_0_gemv(wd, xd, y, N, K, T, version)
        got = y.get()
        if version in ("dp4a", "persist"):
            assert gm.relerr(got, gm.q8_0_gemv_dp4a_ref(x, raw, K)) < 1e-5, version
            assert gm.relerr(got, exact) < (2e-2 if K >= 1024 else 1e-1)   # int8 activations
        else:
            assert gm.relerr(got, exact) < 1e-5, version


@pytest.mark.gpu
@pytest.mark.parametrize("rows,warps,stages", [(1, 2, 2), (2, 4, 3), (4, 2, 4), (4, 1, 2), (1, 8, 4), (2, 2, 4)])
def test_q8_0_gemv_dp4a_configs(rows, warps, stages):
    ga = _ga()
    rng = np.random.default_rng(rows * 10 + warps + 100 * stages)
    N, K, T = 203, 1056, 5
    raw = q8(rng.standard_normal((N, K), dtype=np.float32))
    x = rng.standard_normal((T, K), dtype=np.float32)
    y = _nan(ga, (T, N))
    gm.q8_0_gemv(ga.to_gpu(raw), ga.to_gpu(x), y, N, K, T, "dp4a", rows=rows, warps=warps, stages=stages)
    assert gm.relerr(y.get(), gm.q8_0_gemv_dp4a_ref(x, raw, K)) < 1e-5


@pytest.mark.gpu
@pytest.mark.parametrize("N,K", [(1, 32), (203, 1056), (1001, 4128)])
@pytest.mark.parametrize("T", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("cfg", [None, (1, 8, 4), (4, 2, 4), (2, 4, 3)])
def test_q8_0_gemv_epilogues(N, K, T, cfg):
    """v3's epilogues against numpy (GEMV v3's own arithmetic, then the residual or SwiGLU in
    float64), and bit for bit against the unfused launches they replace, at every tiling."""
    ga = _ga()
    rng = np.random.default_rng(N + K + 7 * T)
    raw, raw2 = (q8(rng.standard_normal((N, K), dtype=np.float32)) for _ in range(2))
    x = rng.standard_normal((T, K), dtype=np.float32)
    r = rng.standard_normal((T, N), dtype=np.float32)
    kw = dict(zip(("rows", "warps", "stages"), cfg)) if cfg else {}
    wd, w2d, xd, rd = ga.to_gpu(raw), ga.to_gpu(raw2), ga.to_gpu(x), ga.to_gpu(r)
    g_ref, u_ref = gm.q8_0_gemv_dp4a_ref(x, raw, K), gm.q8_0_gemv_dp4a_ref(x, raw2, K)
    plain, plain2, y = _nan(ga, (T, N)), _nan(ga, (T, N)), _nan(ga, (T, N))
    gm.q8_0_gemv(wd, xd, plain, N, K, T, "dp4a", **kw)
    gm.q8_0_gemv(w2d, xd, plain2, N, K, T, "dp4a", **kw)

    gm.q8_0_gemv(wd, xd, y, N, K, T, "dp4a", res=rd, **kw)
    assert gm.relerr(y.get(), r + g_ref) < 1e-5
    assert np.array_equal(y.get(), r + plain.get())             # the add kernel computes a + b in f32

    y.fill(np.float32(np.nan))
    gm.q8_0_gemv(wd, xd, y, N, K, T, "dp4a", w2=w2d, **kw)
    assert gm.relerr(y.get(), g_ref / (1 + np.exp(-g_ref)) * u_ref) < 1e-5
    from tffedu.factory import OPS
    unfused = OPS.get("swiglu", "cuda")(plain, plain2).get()
    assert np.array_equal(y.get(), unfused)


@pytest.mark.gpu
@pytest.mark.parametrize("T,D", [(1, 32), (3, 1024), (1, 1056), (8, 4096), (2, 12288)])
def test_rmsnorm_q8_is_the_norm_then_the_quantization(T, D):
    "rmsnorm_q8's packed bytes equal rmsnorm (chapter 10) then GEMV v3's quantize kernel, bit for bit."
    ga = _ga()
    from tffedu.factory import OPS
    rng = np.random.default_rng(T * D)
    x = ga.to_gpu(rng.standard_normal((T, D), dtype=np.float32))
    w = ga.to_gpu((1 + 0.1 * rng.standard_normal(D)).astype(np.float32))
    got = OPS.get("rmsnorm_q8", "cuda")(x, w, eps=1e-6).get()
    assert got.shape == (T, D + D // 8) and got.dtype == np.int8
    y = OPS.get("rmsnorm", "cuda")(x, w, eps=1e-6)
    xq, xd = ga.empty((T, D), np.int8), ga.empty((T, D // 32), np.float32)
    gm.quantize_act(y, xq, xd, T, D)
    want = np.concatenate([xq.get().reshape(-1), xd.get().reshape(-1).view(np.int8)])
    assert np.array_equal(got.reshape(-1), want)
    with pytest.raises(ShapeError):
        OPS.get("rmsnorm_q8", "cuda")(ga.zeros((2, 48), np.float32), ga.zeros(48, np.float32))


@pytest.mark.gpu
def test_q8_0_gemv_epilogue_errors():
    ga = _ga()
    w, x, y = ga.zeros((4, 34), np.uint8), ga.zeros((1, 32), np.float32), ga.zeros((1, 4), np.float32)
    with pytest.raises(ShapeError):
        gm.q8_0_gemv(w, x, y, 4, 32, 1, "persist", res=y)            # epilogues are v3's
    with pytest.raises(ShapeError):
        gm.q8_0_gemv(w, x, y, 4, 32, 1, "dp4a", res=y, w2=w)          # one at a time


@pytest.mark.gpu
@pytest.mark.parametrize("T,N,K,wt", [(1, 1001, 4096, "Q8_0"), (8, 515, 1024, "Q8_0"), (9, 515, 1024, "Q8_0"),
                                      (3, 77, 128, "F16"), (40, 96, 256, "Q8_0"), (40, 300, 2048, "Q8_0"),
                                      (200, 20000, 256, "Q8_0"), (300, 130, 512, "Q8_0"), (20, 64, 96, "Q8_0")])
def test_fused_matmul_ops_equal_the_ops_they_replace(T, N, K, wt):
    """matmul_add / matmul_swiglu (chapter 12b's lowering) give exactly what the unfused ops give: in
    GEMV v3's epilogue (T <= 8), in version 6's split-K reduction or, in one piece, its own epilogue
    (16 to 256 tokens per tile), and unfused (the slab path with K % 256 != 0)."""
    ga = _ga()
    from tffedu.factory import OPS
    op = lambda name: OPS.get(name, "cuda")                          # noqa: E731
    rng = np.random.default_rng(T * N + K)
    x = ga.to_gpu(rng.standard_normal((T, K), dtype=np.float32))
    r = ga.to_gpu(rng.standard_normal((T, N), dtype=np.float32))
    ws = [rng.standard_normal((N, K), dtype=np.float32) for _ in range(2)]
    wg, wu = (ga.to_gpu(q8(w) if wt == "Q8_0" else w.astype(np.float16)) for w in ws)
    g, u = op("matmul")(x, wg, w_dtype=wt), op("matmul")(x, wu, w_dtype=wt)
    assert np.array_equal(op("matmul_add")(x, wg, r, w_dtype=wt).get(), op("add")(r, g).get())
    assert np.array_equal(op("matmul_swiglu")(x, wg, wu, w_dtype=wt).get(), op("swiglu")(g, u).get())
    with pytest.raises(ShapeError):
        half = ws[0][: N // 2]
        op("matmul_swiglu")(x, wg, ga.to_gpu(q8(half) if wt == "Q8_0" else half.astype(np.float16)), w_dtype=wt)
    with pytest.raises(ShapeError):
        op("matmul_add")(x, wg, ga.zeros((T, N + 1), np.float32), w_dtype=wt)


@pytest.mark.gpu
@pytest.mark.parametrize("rows,warps,stages", [(1, 4, 2), (1, 4, 4), (2, 4, 2), (4, 2, 2), (1, 8, 2), (2, 2, 3)])
@pytest.mark.parametrize("bps", [None, 1])
def test_q8_0_gemv_persist_many_rows_per_warp(rows, warps, stages, bps):
    "v4 with a small grid (1 block per SM): every warp walks ~10 row groups through one pipeline."
    ga = _ga()
    rng = np.random.default_rng(rows * 10 + warps + 100 * stages + (bps or 0))
    N, K = 5003, 1056                       # 33 blocks per row: a full tile and a 1-block tile
    for T in (1, 3):
        raw = q8(rng.standard_normal((N, K), dtype=np.float32))
        x = rng.standard_normal((T, K), dtype=np.float32)
        y = _nan(ga, (T, N))
        gm.q8_0_gemv(ga.to_gpu(raw), ga.to_gpu(x), y, N, K, T, "persist", rows=rows, warps=warps, stages=stages,
                     blocks_per_sm=bps)
        assert gm.relerr(y.get(), gm.q8_0_gemv_dp4a_ref(x, raw, K)) < 1e-5


@pytest.mark.gpu
@pytest.mark.parametrize("version", ["dp4a", "persist"])
def test_cuda_graph_replay_matches_launch(version):
    "The loop of launches captured into a CUDA graph computes the same as the launches themselves."
    import pycuda.driver as drv
    ga = _ga()
    rng = np.random.default_rng(77)
    N, K, T = 771, 2080, 2
    raws = [q8(rng.standard_normal((N, K), dtype=np.float32)) for _ in range(3)]
    x = rng.standard_normal((T, K), dtype=np.float32)
    xd = ga.to_gpu(x)
    ys = [_nan(ga, (T, N)) for _ in range(3)]
    ws = [ga.to_gpu(r) for r in raws]
    s = drv.Stream()
    gos = [gm.q8_0_gemv_launcher(w, xd, y, N, K, T, version, stream=s) for w, y in zip(ws, ys)]
    g = gm.CudaGraph(lambda: [go() for go in gos], s)
    for y in ys:
        assert np.isnan(y.get()).all()              # captured, not run
    g.replay()
    g.replay()
    s.synchronize()
    for r, y in zip(raws, ys):
        assert gm.relerr(y.get(), gm.q8_0_gemv_dp4a_ref(x, r, K)) < 1e-5


@pytest.mark.gpu
def test_q8_0_gemv_rejects_bad_args():
    ga = _ga()
    w = ga.to_gpu(np.zeros((4, 34), np.uint8))
    x = ga.to_gpu(np.zeros((9, 32), np.float32))
    y = ga.to_gpu(np.zeros((9, 4), np.float32))
    with pytest.raises(ShapeError):
        gm.q8_0_gemv(w, x, y, 4, 32, 9, "dp4a")                 # T > 8
    with pytest.raises(ShapeError):
        gm.q8_0_gemv(w, x, y, 4, 33, 1, "dp4a")                 # K not a multiple of 32
    with pytest.raises(ShapeError):
        gm.q8_0_gemv(w, x, y, 4, 32, 1, "dp4a", rows=4, warps=8, stages=4)   # > 48 KB shared memory
    with pytest.raises(ShapeError):
        gm.q8_0_gemv(w, x, y, 4, 32, 1, "bogus")


@pytest.mark.gpu
def test_dequant_q8_0_matches_gguf():
    ga = _ga()
    rng = np.random.default_rng(6)
    N, K = 77, 160
    raw = q8(rng.standard_normal((N, K), dtype=np.float32))
    out = ga.empty((N, K), np.float16)
    gm.dequant_q8_0(ga.to_gpu(raw), out, N, K)
    np.testing.assert_array_equal(out.get(), dequantize(raw, Q8).astype(np.float16))


# ------------------------------------------------------------------ GPU: version 6 (Q8_0 into wgmma)
def _q8_inputs(M, N, K, seed):
    "Random Q8_0 weights (rows of very different scales), their fp16 values (gguf-py's), fp16 x."
    rng = np.random.default_rng(seed)
    scale = 10.0 ** rng.uniform(-3, 1, (N, 1))
    raw = q8(rng.standard_normal((N, K)) * scale)
    w16 = dequantize(raw, Q8).astype(np.float16)
    x = rng.standard_normal((M, K), dtype=np.float32).astype(np.float16)
    return x, raw, w16


V6_SHAPES = [(9, 1, 256), (16, 128, 256), (17, 77, 512), (33, 515, 1024), (64, 300, 768), (65, 129, 4096),
             (130, 1001, 1280), (300, 256, 256), (600, 130, 512)]


@pytest.mark.gpu
@pytest.mark.parametrize("splits", [1, 3])
@pytest.mark.parametrize("cfg", range(len(qm.Q8_GEMM_CONFIGS)))
@pytest.mark.parametrize("M,N,K", V6_SHAPES)
def test_q8_gemm_configs(M, N, K, cfg, splits):
    "Every tile config, with and without a K split, on odd shapes: equal to x @ w16.T (float64)."
    ga = _ga()
    if not gm.wgmma_available():
        pytest.skip("wgmma needs an sm_90 GPU")
    x, raw, w16 = _q8_inputs(M, N, K, seed=M + 7 * N + 13 * K + cfg)
    c = dict(qm.Q8_GEMM_CONFIGS[cfg], splits=splits)
    y = _nan(ga, (M, N))
    part = ga.empty(max(1, qm.q8_gemm_part_bytes(M, N, K, **c) // 4), np.float32)
    qm.q8_gemm(ga.to_gpu(x), ga.to_gpu(raw), y, M, N, K, c, part=part)
    assert gm.relerr(y.get(), gm.matmul_ref(x, w16)) < 1e-5


@pytest.mark.gpu
@pytest.mark.parametrize("splits", [1, 3])
@pytest.mark.parametrize("cfg", [0, 2, 4])
@pytest.mark.parametrize("M,Ns,K", [(5, (128, 64, 64), 256), (17, (77, 33), 512), (40, (300, 129, 129), 1024),
                                    (130, (1, 200, 5), 768), (300, (260, 64, 64), 512)])
def test_q8_gemm_cat(M, Ns, K, cfg, splits):
    """Version 6 over two or three matrices in one grid (tiles straddle them where N is odd): the
    planar output is x @ wi.T [M, Ni] for each, one after the other (float64 reference)."""
    ga = _ga()
    if not gm.wgmma_available():
        pytest.skip("wgmma needs an sm_90 GPU")
    ins = [_q8_inputs(M, n, K, seed=M + 7 * n + i) for i, n in enumerate(Ns)]
    x = ins[0][0]
    c = dict(qm.Q8_GEMM_CONFIGS[cfg], splits=splits)
    y = _nan(ga, (M * sum(Ns),))
    part = ga.empty(max(1, qm.q8_gemm_part_bytes(M, sum(Ns), K, **c) // 4), np.float32)
    ws = [ga.to_gpu(raw) for _, raw, _ in ins]
    qm.q8_gemm(ga.to_gpu(x), ws[0], y, M, Ns[0], K, c, part=part, cat=list(zip(ws[1:], Ns[1:])))
    want = np.concatenate([gm.matmul_ref(x, w16).ravel() for _, _, w16 in ins])
    assert gm.relerr(y.get(), want) < 1e-5


@pytest.mark.gpu
@pytest.mark.parametrize("T,Ns,K,wt", [(1, (96, 32, 32), 256, "Q8_0"), (4, (100, 36), 64, "Q8_0"),
                                       (6, (200, 72, 72), 512, "Q8_0"), (7, (64, 32, 32), 96, "Q8_0"),
                                       (32, (4096, 1024, 1024), 4096, "Q8_0"), (40, (256, 130, 130), 1024, "Q8_0"),
                                       (300, (64, 32, 32), 256, "Q8_0"), (9, (64, 32), 96, "Q8_0"),
                                       (3, (96, 32, 32), 64, "F16")])
def test_matmul_cat_is_its_parts(T, Ns, K, wt):
    """matmul_cat's planar output is the separate matmuls' outputs end to end: bit for bit where GEMV v3
    runs (the same rows, one launch) or the parts run one by one (the slab, F16); within float
    rounding in version 6, whose one grid may split K otherwise than each matmul alone."""
    ga = _ga()
    from tffedu.factory import OPS
    op = lambda name: OPS.get(name, "cuda")                          # noqa: E731
    rng = np.random.default_rng(T + sum(Ns) + K)
    x = ga.to_gpu(rng.standard_normal((T, K), dtype=np.float32))
    ws = [rng.standard_normal((n, K), dtype=np.float32) * 0.1 for n in Ns]
    wd = [ga.to_gpu(q8(w) if wt == "Q8_0" else w.astype(np.float16)) for w in ws]
    want = np.concatenate([op("matmul")(x, w, w_dtype=wt).get().ravel() for w in wd])
    got = op("matmul_cat")(x, *wd, w_dtype=wt).get()
    assert got.shape == (T * sum(Ns),)
    v6 = wt == "Q8_0" and not cm.reads_packed_i8(wt, T, K) and qm.q8_gemm_available(K, T)
    if v6:
        assert gm.relerr(got, want) < 1e-5
    else:
        assert np.array_equal(got, want)
    if wt == "Q8_0" and T <= 8:                                      # packed int8 activations: one GEMV
        xq = op("rmsnorm_q8")(x, ga.to_gpu(np.ones(K, np.float32)))
        want = np.concatenate([op("matmul_q8")(xq, w, w_dtype=wt).get().ravel() for w in wd])
        assert np.array_equal(op("matmul_cat")(xq, *wd, w_dtype=wt).get(), want)
    with pytest.raises(ShapeError, match="one K and one dtype"):
        op("matmul_cat")(x, wd[0], ga.to_gpu(q8(ws[1][:, :32]) if wt == "Q8_0" else ws[1][:, :32].astype(np.float16)),
                         w_dtype=wt)


@pytest.mark.gpu
@pytest.mark.parametrize("V", [6, 7])
@pytest.mark.parametrize("BT", [16, 64, 256])
def test_q8_gemm_dequantizes_exactly(BT, V):
    """One-hot token rows pick single weights: y[m, n] must be the fp16 value of d*q (gguf-py's
    dequantization, rounded once), bit for bit, down to subnormal scales (versions 6 and 7)."""
    ga = _ga()
    if not gm.wgmma_available():
        pytest.skip("wgmma needs an sm_90 GPU")
    rng = np.random.default_rng(BT)
    M, N, K = 96, 200, 512
    w = rng.standard_normal((N, K)) * 10.0 ** rng.uniform(-9, 2, (N, 1))     # d from subnormal to large
    raw = q8(w)
    w16 = dequantize(raw, Q8).astype(np.float16)
    ks = rng.choice(K, M)
    x = np.zeros((M, K), np.float16)
    x[np.arange(M), ks] = 1
    y = _nan(ga, (M, N))
    qm.q8_gemm(ga.to_gpu(x), ga.to_gpu(raw), y, M, N, K, dict(V=V, BT=BT, splits=1))
    np.testing.assert_array_equal(y.get(), w16[:, ks].T.astype(np.float32))


@pytest.mark.gpu
def test_q8_gemm_ldy_and_errors():
    "y wider than N keeps its other columns; K % 256 != 0 and a split without scratch are refused."
    ga = _ga()
    if not gm.wgmma_available():
        pytest.skip("wgmma needs an sm_90 GPU")
    M, N, K, ldy = 40, 100, 512, 130
    x, raw, w16 = _q8_inputs(M, N, K, seed=3)
    y = ga.to_gpu(np.full((M, ldy), 7.0, np.float32))
    qm.q8_gemm(ga.to_gpu(x), ga.to_gpu(raw), y, M, N, K, dict(splits=1), ldy=ldy)
    got = y.get()
    assert gm.relerr(got[:, :N], gm.matmul_ref(x, w16)) < 1e-5 and np.all(got[:, N:] == 7.0)
    with pytest.raises(ShapeError, match="multiple of 256"):
        qm.q8_gemm(ga.to_gpu(x[:, :128]), ga.to_gpu(raw), y, M, N, 128)
    with pytest.raises(ShapeError, match="part="):
        qm.q8_gemm(ga.to_gpu(x), ga.to_gpu(raw), y, M, N, K, dict(splits=2))
    with pytest.raises(ShapeError, match="no ldy"):                 # a cat launch's parts are planar
        qm.q8_gemm(ga.to_gpu(x), ga.to_gpu(raw), y, M, N, K, dict(splits=1), ldy=ldy, cat=[(ga.to_gpu(raw), N)])
    with pytest.raises(ShapeError, match="one epilogue"):
        qm.q8_gemm(ga.to_gpu(x), ga.to_gpu(raw), y, M, N, K, res=y, w2=ga.to_gpu(raw))


# ------------------------------------------------------------------ version 7 (TMA, mbarriers)
def test_q8_tma_ring_fits_shared_memory():
    "Version 7's ring: at least 4 stages for every tile, inside the 227 KB a block may have."
    for BT in (16, 32, 64, 128, 256):
        S = qm.q8_tma_stages(BT)
        assert 4 <= S <= 8
        assert qm.q8_gemm_smem(dict(V=7, BT=BT, STAGES=S)) <= 227 * 1024
        assert qm.q8_gemm_smem(dict(V=7, BT=BT, STAGES=S + 1)) > 227 * 1024 or S == 8


def test_q8_tma_takes_only_whole_tiles_of_each_part():
    "A tile reads one part: parts followed by another must be whole 128-row tiles; addresses 16-byte aligned."
    assert qm._tma_fits(0, [(256, 4096), (512, 1024), (768, 1024)])       # q | k | v
    assert qm._tma_fits(0, [(256, 77), (256, 0), (256, 0)])               # one matrix: any rows
    assert qm._tma_fits(0, [(256, 256), (512, 100), (256, 0)])            # the last part: any rows
    assert not qm._tma_fits(0, [(256, 200), (512, 128), (256, 0)])
    assert not qm._tma_fits(0, [(256, 256), (512, 100), (768, 64)])
    assert not qm._tma_fits(8, [(256, 128), (256, 0), (256, 0)])          # x misaligned
    assert not qm._tma_fits(0, [(264, 128), (256, 0), (256, 0)])


@pytest.mark.gpu
@pytest.mark.parametrize("M,N,K", [(1, 1, 256), (2, 65, 256), (17, 77, 512), (64, 64, 768), (65, 129, 4096),
                                   (130, 1001, 1280), (300, 256, 256)])
def test_q8_mmq(M, N, K):
    """The int8 tensor-core Q8_0 GEMM (llama.cpp's MMQ idea) computes GEMV v3's sums, checked against
    q8_0_gemv_dp4a_ref (numpy: the same integer dot products and scales, in float64), from F16 and
    F32 activations, on odd shapes: partial 64 x 64 tiles, one and many stages."""
    ga = _ga()
    x, raw, _ = _q8_inputs(M, N, K, seed=M + 3 * N + K)
    for dt, xx in (("F16", x), ("F32", x.astype(np.float32))):
        y = _nan(ga, (M, N))
        qm.q8_mmq(ga.to_gpu(xx), ga.to_gpu(raw), y, M, N, K, x_dtype=dt)
        assert gm.relerr(y.get(), gm.q8_0_gemv_dp4a_ref(xx.astype(np.float32), raw, K)) < 1e-5, dt


@pytest.mark.gpu
@pytest.mark.parametrize("splits", [1, 3])
@pytest.mark.parametrize("BT", [16, 32, 64, 128, 256])
@pytest.mark.parametrize("M,N,K", V6_SHAPES + [(1030, 200, 512)])
def test_q8_tma_configs(M, N, K, BT, splits):
    """Version 7 on odd shapes, every tile, with and without a K split: equal to x @ w16.T (float64),
    and unsplit bit for bit version 6 with the same tile (the same products in the same order)."""
    ga = _ga()
    if not gm.wgmma_available():
        pytest.skip("wgmma needs an sm_90 GPU")
    x, raw, w16 = _q8_inputs(M, N, K, seed=M + 7 * N + 13 * K + BT)
    xg, wg = ga.to_gpu(x), ga.to_gpu(raw)
    c = dict(V=7, BT=BT, splits=splits)
    y = _nan(ga, (M, N))
    part = ga.empty(max(1, qm.q8_gemm_part_bytes(M, N, K, **c) // 4), np.float32)
    qm.q8_gemm(xg, wg, y, M, N, K, c, part=part)
    got = y.get()
    assert gm.relerr(got, gm.matmul_ref(x, w16)) < 1e-5
    if splits == 1:
        y6 = _nan(ga, (M, N))
        qm.q8_gemm(xg, wg, y6, M, N, K, dict(V=6, BT=BT, splits=1))
        np.testing.assert_array_equal(got, y6.get())


@pytest.mark.gpu
@pytest.mark.parametrize("splits", [1, 2])
@pytest.mark.parametrize("M,Ns,K", [(77, (256, 128, 128), 512), (512, (384, 128, 50), 1024),
                                    (33, (200, 100, 100), 512), (300, (128, 77), 256)])
def test_q8_tma_epilogues(M, Ns, K, splits):
    """Version 7's residual, gate|up pair (unsplit: the SwiGLU in the kernel, the bits of version 6's
    reduction) and cat (parts of whole tiles; others are refused, and by default version 6 runs),
    against float64."""
    ga = _ga()
    if not gm.wgmma_available():
        pytest.skip("wgmma needs an sm_90 GPU")
    ins = [_q8_inputs(M, n, K, seed=M + 11 * n + i) for i, n in enumerate(Ns)]
    x, N = ins[0][0], Ns[0]
    xg, ws = ga.to_gpu(x), [ga.to_gpu(raw) for _, raw, _ in ins]
    refs = [gm.matmul_ref(x, w16) for _, _, w16 in ins]
    c = dict(V=7, splits=splits)

    def run(rows, ep, **kw):
        y = _nan(ga, (M, N) if ep else (M * rows,))
        part = ga.empty(max(1, qm.q8_gemm_part_bytes(M, rows, K, ep, **c) // 4), np.float32)
        qm.q8_gemm(xg, ws[0], y, M, N, K, c, part=part, **kw)
        return y.get()

    r = np.random.default_rng(M).standard_normal((M, N)).astype(np.float32)
    assert gm.relerr(run(N, "res", res=ga.to_gpu(r)), refs[0] + r) < 1e-5
    _, up, up16 = _q8_inputs(M, N, K, seed=M + 5)
    u = gm.matmul_ref(x, up16)
    pair = run(N, "pair", w2=ga.to_gpu(up))                    # unsplit: silu(gate) * up in the kernel
    assert gm.relerr(pair, refs[0] / (1 + np.exp(-refs[0])) * u) < 1e-5
    if splits == 1:                                            # = version 6's matmul + reduction, bit for bit
        c6 = dict(V=6, BT=qm.q8_gemm_config(M, N, K, **c)["BT"], splits=1)
        y6 = _nan(ga, (M, N))
        part6 = ga.empty(qm.q8_gemm_part_bytes(M, N, K, "pair", **c6) // 4, np.float32)
        qm.q8_gemm(xg, ws[0], y6, M, N, K, c6, part=part6, w2=ga.to_gpu(up))
        np.testing.assert_array_equal(pair, y6.get())
    want = np.concatenate([y.ravel() for y in refs])
    if len(Ns) == 3 and Ns[0] % 128 == 0 and Ns[1] % 128 == 0 or len(Ns) == 2 and Ns[0] % 128 == 0:
        assert gm.relerr(run(sum(Ns), None, cat=list(zip(ws[1:], Ns[1:]))), want) < 1e-5
    else:                                                      # parts that split a tile: version 6 runs
        with pytest.raises(ShapeError, match="whole 128-row tiles"):
            run(sum(Ns), None, cat=list(zip(ws[1:], Ns[1:])))
        c = dict(splits=splits)                                # the default: version 6 takes over
        assert gm.relerr(run(sum(Ns), None, cat=list(zip(ws[1:], Ns[1:]))), want) < 1e-5


# ------------------------------------------------------------------ GPU: the registered op
@pytest.mark.gpu
@pytest.mark.parametrize("T,N,K,wt,xt", [
    (1, 77, 131, "F16", "F32"), (5, 77, 131, "F16", "F16"), (300, 77, 131, "F16", "F32"),
    (200, 129, 64, "BF16", "F32"), (3, 129, 64, "BF16", "F16"),
    (1, 1001, 4096, "Q8_0", "F32"), (8, 1001, 4096, "Q8_0", "F16"), (9, 1001, 4096, "Q8_0", "F32"),
    (300, 515, 1024, "Q8_0", "F16"), (40, 300, 2048, "Q8_0", "F32"), (33, 65, 96, "Q8_0", "F32"), (100, 70, 512, "Q8_0", "F16"),
    (7, 65, 33, "F32", "F32"), (70, 65, 33, "F32", "F16"),
    (1, 128, 2048, "F32", "F32"), (513, 128, 2048, "F32", "F32"), (20, 1100, 2048, "F32", "F16"),  # router; regblock
    (257, 300, 512, "F16", "F16"), (129, 100, 200, "BF16", "F32"),
])
def test_matmul_op(T, N, K, wt, xt):
    ga = _ga()
    from tffedu.factory import OPS
    mm = OPS.get("matmul", "cuda")
    rng = np.random.default_rng(T + N + K)
    x = rng.standard_normal((T, K), dtype=np.float32)
    if xt == "F16":
        x = x.astype(np.float16)
    wf = rng.standard_normal((N, K), dtype=np.float32)
    tol = 1e-5
    if wt == "Q8_0":
        w = q8(wf)
        ref = gm.q8_0_gemv_ref(x.astype(np.float32), w, K)
        tol = 2e-2 if T <= 8 else 2e-3               # int8 activations / fp16 activations
    elif wt == "F16":
        w = wf.astype(np.float16)
        ref = gm.matmul_ref(x.astype(np.float16), w)
    elif wt == "BF16":
        w, wr = _bf16_bits(wf)
        ref = gm.matmul_ref(x.astype(np.float32), wr)
        tol = 1e-2                                   # x rounded to bf16 on the device
    else:
        w = wf
        ref = gm.matmul_ref(x.astype(np.float32), w)
    y = mm(ga.to_gpu(x), ga.to_gpu(w), w_dtype=wt)
    assert y.shape == (T, N) and y.dtype == np.float32
    assert gm.relerr(y.get(), ref) < tol


@pytest.mark.gpu
def test_gemv_f_rows_do_not_depend_on_the_batch():
    "gemv_f sums a row in one order at every batch: a token's router logits alone = in a batch, bit for bit."
    ga = _ga()
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((13, 2048), dtype=np.float32), rng.standard_normal((128, 2048), dtype=np.float32)
    y13 = cm.matmul(ga.to_gpu(x), ga.to_gpu(w)).get()
    for t in (0, 5, 12):
        assert np.array_equal(cm.matmul(ga.to_gpu(x[t:t + 1]), ga.to_gpu(w)).get(), y13[t:t + 1])
    assert gm.relerr(y13, gm.matmul_ref(x, w)) < 1e-5


@pytest.mark.gpu
def test_matmul_op_shape_errors():
    ga = _ga()
    x = ga.zeros((2, 64), np.float32)
    with pytest.raises(ShapeError):
        cm.matmul(x, ga.zeros((3, 32), np.float32))                      # K mismatch
    with pytest.raises(ShapeError):
        cm.matmul(x, ga.zeros((3, 65), np.uint8), w_dtype="Q8_0")      # not whole blocks
    with pytest.raises(ShapeError):
        cm.matmul(ga.zeros((2, 64), np.int32), ga.zeros((3, 64), np.float32))
    with pytest.raises(ShapeError):
        cm.matmul(x, ga.zeros((3, 64), np.float32), out=ga.zeros((2, 4), np.float32))


@pytest.mark.gpu
def test_matmul_op_tffedu_tensors():
    tensor = pytest.importorskip("tffedu.tensor")
    _ga()
    rng = np.random.default_rng(7)
    T, N, K = 2, 96, 256
    x = rng.standard_normal((T, K), dtype=np.float32)
    wf = rng.standard_normal((N, K), dtype=np.float32)
    raw = q8(wf)
    xt = tensor.Tensor.from_numpy(x).to("cuda")
    wt = tensor.Tensor.from_buffer(raw, tensor.Q8_0, (N, K)).to("cuda")
    y = cm.matmul(xt, wt)
    assert tuple(y.shape) == (T, N)
    got = y.to("cpu").numpy()
    assert gm.relerr(got, gm.q8_0_gemv_ref(x, raw, K)) < 2e-2
    wh = tensor.Tensor.from_numpy(wf.astype(np.float16)).to("cuda")
    got = cm.matmul(xt, wh).to("cpu").numpy()
    assert gm.relerr(got, gm.matmul_ref(x.astype(np.float16), wf.astype(np.float16))) < 1e-5
