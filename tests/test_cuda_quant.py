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
from tffedu.ops import cuda_gemm as gm
from tffedu.ops import cuda_q8_gemm as qm
from tffedu.ops import cuda_matmul as cm
from tffedu.ops import cuda_quant as cq
from tffedu.quant import dequantize

TYPES = list(cq.QUANT_TYPES)


FILE_OF = cq.FILE_TYPES                                # a GPU layout -> the file type it holds


def weights(wk: str, N: int, K: int, seed: int) -> np.ndarray:
    "Raw `wk` rows of random weights, with an all-zero row and an outlier row (repacked for a GPU layout)."
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((N, K)) * 0.05).astype(np.float32)
    w[0] = 0.0
    if N > 2:
        w[2, : K // 2] *= 30
    return cq.quantize_gpu(w, wk)


def gguf_dequantize(raw: np.ndarray, wk: str) -> np.ndarray:
    "gguf-py's dequantization of raw `wk` rows (a GPU layout: of the file's blocks it holds)."
    raw, wk = cq.file_blocks(raw, wk)
    return gguf.quants.dequantize(raw, QT[wk])


# ------------------------------------------------------------------ CPU
def test_the_rows_are_gguf_py_block_sizes():
    for wk in TYPES:
        row = cm.GPU_WEIGHTS[wk]
        qk, nbytes = gguf.GGML_QUANT_SIZES[QT[FILE_OF.get(wk, wk)]]
        assert (row.block, row.block_bytes) == (
            (256, 216 if FILE_OF[wk] == "Q6_K" else 8 * nbytes) if wk in FILE_OF else (qk, nbytes))
        assert row.gemv.packed_i8 and row.gemv.max_rows == cq.GEMV_MAX_ROWS
        assert row.get_rows[:2] == ("gemv_quant.cu", "get_rows_quant")
        assert row.get_rows[2]["WTYPE"] == QT[FILE_OF.get(wk, wk)].value + (100 if wk in FILE_OF else 0)


def test_padded_q6_k_holds_the_files_blocks():
    "Q6_KP: each of the file's 210-byte blocks, then 6 zero bytes (quant_blocks.cuh reads it as Q6_K)."
    raw = weights("Q6_K", 4, 768, 5)
    p = cq.repack_blocks(raw, "Q6_K").reshape(4, 3, 216)
    assert np.array_equal(p[..., :210].reshape(4, -1), raw) and not p[..., 210:].any()
    assert np.array_equal(cq.unpack_blocks(p.reshape(4, -1), "Q6_K"), raw)


@pytest.mark.parametrize("wk", [k for k in cq.REPACKED if k != "Q6_K"])
def test_repacked_blocks_hold_the_files_values(wk):
    """The regrouping by eight (quant_blocks.cuh's X8 formats) is lossless, and its readers, as the
    header describes them (scales first, fifth bits, nibbles of blocks 2c | 2c+1), give gguf-py's values."""
    raw = weights(wk, 6, 768, 3)
    g = cq.repack_blocks(raw, wk)
    assert g.shape == (6, 3 * 8 * cq.DTYPES[wk].type_size) and np.array_equal(cq.unpack_blocks(g, wk), raw)
    pairs, high, off = wk in ("Q4_1", "Q5_1"), wk.startswith("Q5"), {"Q4_0": 8, "Q5_0": 16}.get(wk, 0)
    head = 32 if pairs else 16
    blk = g.reshape(6, 3, -1)
    sc = blk[..., :head].copy().view(np.float16).astype(np.float32).reshape(6, 3, 8, -1)   # [.., j, d (m)]
    codes = blk[..., head + 32 * high:].reshape(6, 3, 4, 1, 32) >> np.array([0, 4], np.uint8)[:, None]
    q = (codes & 15).reshape(6, 3, 8, 32).astype(np.int32)                 # block j = 2c + (j & 1)
    if high:
        q |= ((blk[..., head:head + 32][:, :, None, :] >> np.arange(8, dtype=np.uint8)[:, None]) & 1).astype(np.int32) << 4
    vals = sc[..., :1] * (q - off).astype(np.float32) + (sc[..., 1:] if pairs else np.float32(0))
    np.testing.assert_array_equal(vals.reshape(6, 768), gguf.quants.dequantize(raw, QT[wk]).reshape(6, 768))


@pytest.mark.parametrize("wk", TYPES)
def test_reference_is_the_quantized_product(wk):
    "quant_gemv_ref = (x rounded to int8 blocks as the kernel does) @ (gguf-py's dequantization).T."
    K = 512
    raw = weights(wk, 5, K, 1)
    x = np.random.default_rng(2).standard_normal((3, K)).astype(np.float32)
    xq, xd = gm.quantize_act_ref(x)
    xs = (xq.reshape(3, -1, 32) * xd[..., None].astype(np.float64)).reshape(3, K)
    want = xs @ gguf_dequantize(raw, wk).astype(np.float64).T
    np.testing.assert_allclose(cq.quant_gemv_ref(x, raw, wk, K), want, rtol=1e-12, atol=1e-12)


def test_slab_rows():
    "The prefill slabs are chapter 11's (one size of slab for every format)."
    assert gm.q8_0_slab_rows(12288, 4096) == min(12288, gm.DEQUANT_SLAB_BYTES // (2 * 4096) // 128 * 128)
    assert gm.q8_0_slab_rows(5, 256) == 5 and gm.q8_0_slab_rows(10 ** 6, 10 ** 6) == 128


def test_w_box_holds_every_tile():
    """Version 7's weight box: for each 64-k tile of a long row, the blocks covering it (2 x 32 weights
    or one super-block, gguf-py's sizes) from the tile's first byte rounded down to 16 fit the box;
    the box is 16-byte granular and no wider than that needs; the ring fits shared memory."""
    for wk in TYPES:
        qk, nbytes = cq.DTYPES[wk].block_size, cq.DTYPES[wk].type_size
        box = cq.quant_w_box(wk)
        need = 0
        for kt in range(256):
            first = (64 * kt // qk) * nbytes                       # the byte where the tile's blocks start
            last = (64 * (kt + 1) - 1) // qk * nbytes + nbytes      # one past their end
            need = max(need, last - (first & ~15))
        assert box % 16 == 0 and need <= box < need + 16, wk
        assert qm.TMA_GEMMS[wk].defines == {"WTYPE": cq.DTYPES[wk].ggml_id, "W_BOX": box}
        for BT in (16, 32, 64, 128, 256):
            S = qm.q8_tma_stages(BT, box)
            assert S >= 3 and qm.q8_gemm_smem(dict(V=7, BT=BT, STAGES=S, WB=box)) <= 227 * 1024


def test_launcher_refuses_tilings_it_cannot_run():
    "Checked before any kernel is built (addresses as ints, no GPU): stages per road, shared memory."
    args = (256, "Q6_K", 512, 1024, 64, 512, 1)                  # Q6_K: the staged road
    with pytest.raises(ShapeError, match="staged road keeps at least 2 stages"):
        cq.quant_gemv_launcher(*args, xq=4096, xd=8192, stages=1)
    with pytest.raises(ShapeError, match="48 KB"):
        cq.quant_gemv_launcher(*args, xq=4096, xd=8192, rows=8, warps=8, stages=8)


def test_tensor_core_path_needs_rows_of_whole_16_bytes():
    "Row bytes a multiple of 16 (the tensor map's stride): Q6_K from K = 2048, padded Q6_KP from 512; the others from 256."
    rows = {wk: [K for K in range(256, 8193, 256) if K // cm.GPU_WEIGHTS[wk].block * cm.GPU_WEIGHTS[wk].block_bytes % 16 == 0]
            for wk in TYPES}
    assert rows["Q6_K"][0] == 2048 and all(K % 2048 == 0 for K in rows["Q6_K"])
    assert rows["Q6_KP"] == list(range(512, 8193, 512))
    assert all(rows[wk] == list(range(256, 8193, 256)) for wk in TYPES if wk not in ("Q6_K", "Q6_KP"))


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
    assert gm.relerr(y.get(), cq.quant_gemv_ref(x, raw, wk, K)) < 1e-5


@pytest.mark.gpu
@pytest.mark.parametrize("wk", cq.DIRECT_TYPES)
@pytest.mark.parametrize("T", [1, 5])
def test_super_blocks_take_either_road(wk, T):
    """Q4_K and Q5_K tensors that start 16-byte aligned are loaded straight into registers (the direct
    road); 4 bytes past that, they go through the shared-memory stages: both give the product."""
    ga = _ga()
    N, K = 70, 2816                                       # 11 super-blocks: the last step of 4 is partial
    raw = weights(wk, N, K, 7)
    x = np.random.default_rng(8).standard_normal((T, K)).astype(np.float32)
    ref = cq.quant_gemv_ref(x, raw, wk, K)
    buf = ga.to_gpu(np.zeros(raw.nbytes + 16, np.uint8))
    for off in (0, 4):                                    # gpuarrays start 256-byte aligned
        host = np.zeros(raw.nbytes + 16, np.uint8)
        host[off:off + raw.nbytes] = raw.reshape(-1)
        buf.set(host)
        y = _nan(ga, (T, N))
        cq.quant_gemv(int(buf.gpudata) + off, wk, ga.to_gpu(x), y, N, K, T)
        assert gm.relerr(y.get(), ref) < 1e-5, off


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
    assert gm.relerr(y.get(), g_ref / (1 + np.exp(-g_ref)) * u_ref) < 1e-5
    assert np.array_equal(y.get(), OPS.get("swiglu", "cuda")(plain, plain2).get())
    cat = _nan(ga, (T * (N + 64),))
    cq.quant_gemv(wd, wk, xd, cat, N, K, T, cat=[(w3d, 64)], **kw)
    got = cat.get()
    assert np.array_equal(got[: T * N].reshape(T, N), plain.get())
    assert gm.relerr(got[T * N:].reshape(T, 64), cq.quant_gemv_ref(x, raw3, wk, K)) < 1e-5
    # packed activations: rmsnorm_q8's bytes through the matmul_q8 op
    nw = ga.to_gpu((1 + 0.1 * rng.standard_normal(K)).astype(np.float32))
    packed = OPS.get("rmsnorm_q8", "cuda")(xd, nw, eps=1e-6)
    normed = OPS.get("rmsnorm", "cuda")(xd, nw, eps=1e-6)
    want = _nan(ga, (T, N))
    cq.quant_gemv(wd, wk, normed, want, N, K, T, **kw)
    got = OPS.get("matmul_q8", "cuda")(packed, wd, w_dtype=wk).get()
    assert np.array_equal(got, want.get())


def _gemm_ref(x, raw, wk, K):
    "x rounded to fp16 (the kernel's activations) @ chapter 03a's weights, in float64."
    N = len(raw)
    return x.astype(np.float16).astype(np.float64) @ dequantize(*cq.file_blocks(raw, wk), (N, K)).astype(np.float64).T


def _tc(ga):
    if not gm.wgmma_available():
        pytest.skip("the tensor-core GEMM needs an sm_90 GPU")


GEMM_TOL = 2e-3          # fp16 weights (the unit's scale and minimum rounded to fp16 too) and activations


@pytest.mark.gpu
@pytest.mark.parametrize("wk", TYPES)
@pytest.mark.parametrize("M,N,K,cfg", [(9, 77, 2048, None), (16, 130, 2048, dict(splits=3)), (100, 300, 2048, None),
                                       (300, 200, 4096, dict(BT=256, splits=2)), (513, 1001, 2048, None),
                                       (33, 64, 256, dict(BT=64)), (64, 129, 768, dict(BT=32, splits=3))])
def test_quant_gemm_every_format(wk, M, N, K, cfg):
    """Version 7 for every format (tiles of 16 to 256 tokens, K splits, partial tiles of rows and
    tokens) against float64; where the format's rows are not whole 16 bytes it refuses by name."""
    ga = _ga()
    _tc(ga)
    raw = weights(wk, N, K, M + N + K)
    x = np.random.default_rng(M).standard_normal((M, K)).astype(np.float16)
    y = _nan(ga, (M, N))
    if not cq.quant_gemm_available(wk, K):
        with pytest.raises(ShapeError, match="multiple of 16 bytes"):
            cq.quant_gemm(ga.to_gpu(x), ga.to_gpu(raw), wk, y, M, N, K)
        return
    c = dict(V=7, **(cfg or {}))
    part = ga.empty(max(1, qm.q8_gemm_part_bytes(M, N, K, **c) // 4), np.float32)
    cq.quant_gemm(ga.to_gpu(x), ga.to_gpu(raw), wk, y, M, N, K, part=part, cfg=cfg)
    assert gm.relerr(y.get(), _gemm_ref(x, raw, wk, K)) < GEMM_TOL


@pytest.mark.gpu
@pytest.mark.parametrize("wk", TYPES)
@pytest.mark.parametrize("splits", [1, 2])
def test_quant_gemm_epilogues(wk, splits):
    """The residual, the gate|up pair (SwiGLU in the kernel when unsplit, in the reduction when
    split) and cat: parts of whole 128-row tiles in one grid, other parts one launch each."""
    ga = _ga()
    _tc(ga)
    M, K = 77, 2048
    rng = np.random.default_rng(7)
    x = rng.standard_normal((M, K)).astype(np.float16)
    xg = ga.to_gpu(x)
    c = dict(V=7, splits=splits)

    def run(N, rows, ep, **kw):
        y = _nan(ga, (M, N) if ep else (M * rows,))
        part = ga.empty(max(1, qm.q8_gemm_part_bytes(M, rows, K, ep, **c) // 4), np.float32)
        cq.quant_gemm(xg, wg, wk, y, M, N, K, part=part, cfg=dict(splits=splits), **kw)
        return y.get()

    N = 256
    raw, up = weights(wk, N, K, 1), weights(wk, N, K, 2)
    wg = ga.to_gpu(raw)
    g, u = _gemm_ref(x, raw, wk, K), _gemm_ref(x, up, wk, K)
    r = rng.standard_normal((M, N)).astype(np.float32)
    assert gm.relerr(run(N, N, "res", res=ga.to_gpu(r)), g + r) < GEMM_TOL
    assert gm.relerr(run(N, N, "pair", w2=ga.to_gpu(up)), g / (1 + np.exp(-g)) * u) < GEMM_TOL
    for Ns in [(256, 128, 64), (200, 100, 100)]:
        parts = [weights(wk, n, K, 10 + n) for n in Ns]
        wg = ga.to_gpu(parts[0])
        want = np.concatenate([_gemm_ref(x, p, wk, K).ravel() for p in parts])
        got = run(Ns[0], sum(Ns), None, cat=[(ga.to_gpu(p), n) for p, n in zip(parts[1:], Ns[1:])])
        assert gm.relerr(got, want) < GEMM_TOL, Ns


@pytest.mark.gpu
@pytest.mark.parametrize("wk", TYPES)
def test_matmul_op_at_every_batch(wk):
    """The matmul op through the weight table: the GEMV up to 8 rows, the tensor cores above (version 7
    from the blocks where the rows are whole 16 bytes, else slabs of dequantized rows; fp16
    activations: a loose tolerance against float64)."""
    ga = _ga()
    from tffedu.factory import OPS
    for N, K in ((300, 1536), (130, 2048)):                   # Q6_K: slabs at 1536, version 7 at 2048
        raw = weights(wk, N, K, 5)
        w64 = dequantize(*cq.file_blocks(raw, wk), (N, K)).astype(np.float64)
        for T in (1, 8, 9, 77, 600):
            x = np.random.default_rng(T).standard_normal((T, K)).astype(np.float32)
            y = OPS.get("matmul", "cuda")(ga.to_gpu(x), ga.to_gpu(raw), w_dtype=wk).get()
            tol = 1e-5 if T <= 8 else 2e-3
            ref = cq.quant_gemv_ref(x, raw, wk, K) if T <= 8 else x.astype(np.float64) @ w64.T
            assert gm.relerr(y, ref) < tol, (N, K, T)


@pytest.mark.gpu
@pytest.mark.parametrize("wk", TYPES)
def test_dequant_and_embedding_are_chapter_03a_bit_for_bit(wk):
    ga = _ga()
    from tffedu.factory import OPS
    N, K = 77, 1024
    raw = weights(wk, N, K, 6)
    ref = dequantize(*cq.file_blocks(raw, wk), (N, K))
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
    with pytest.raises(ShapeError, match="4-byte aligned"):                  # 144-byte blocks: aligned words
        cq.quant_gemv(int(w.gpudata) + 2, "Q4_K", x, y, 3, 256, 1)
