"""Chapter 11 exercises: a tiled matmul (reference: numpy's float64 product) and a Q8_0 GEMV on the
raw blocks (reference: gguf-py's dequantize, then a float64 product), and on a GPU the learner's
warp-per-row Q8_0 GEMV kernel (the same reference)."""
import gguf
import pytest
import numpy as np
from gguf import GGMLQuantizationType as QT

rng = np.random.default_rng(0)


def test_ch11_1_tiled_matmul(impl):
    for M, K, N, tile in [(33, 47, 20, 16), (64, 64, 64, 32), (5, 3, 7, 4)]:
        a, b = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)
        np.testing.assert_allclose(impl.tiled_matmul(a, b, tile), a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


def test_ch11_2_q8_0_gemv(impl):
    W = rng.standard_normal((48, 256)).astype(np.float32)
    raw = gguf.quants.quantize(W, QT.Q8_0)
    x = rng.standard_normal(256).astype(np.float32)
    ref = gguf.quants.dequantize(raw, QT.Q8_0).astype(np.float64) @ x
    np.testing.assert_allclose(impl.q8_0_gemv(x, raw, 48), ref, rtol=1e-4, atol=1e-3)


def _whole_tiles_only(a, b, tile=16):
    M, K = a.shape
    return np.asarray(a[:, :K // tile * tile], np.float32) @ np.asarray(b[:K // tile * tile], np.float32)


def _no_scale(x, raw, n_rows):
    b = np.asarray(raw, np.uint8).reshape(n_rows, -1, 34)
    return (b[..., 2:].copy().view(np.int8).astype(np.float32).reshape(n_rows, -1) * x).sum(-1)


@pytest.mark.gpu
def test_ch11_3_gemv_q8_0_kernel(impl):
    from kernel_check import launch_file, to_gpu
    path = impl.gemv_q8_0_kernel()
    for N, K in [(1, 32), (77, 1024), (130, 4096)]:     # 4096: four blocks per lane
        W = rng.standard_normal((N, K)).astype(np.float32)
        raw = gguf.quants.quantize(W, QT.Q8_0)
        x = rng.standard_normal(K).astype(np.float32)
        y = to_gpu(np.full(N, np.nan, np.float32))
        launch_file(path, "gemv_q8_0_warp_ex", "PPPii", (-(-N // 4),), (128,), to_gpu(raw), to_gpu(x), y,
                    np.int32(N), np.int32(K))
        ref = gguf.quants.dequantize(raw, QT.Q8_0).astype(np.float64) @ x
        np.testing.assert_allclose(y.get(), ref, rtol=1e-4, atol=1e-3, err_msg=f"N={N}, K={K}")


def _lane_zero_only():
    from solutions.ch11 import gemv_q8_0_kernel
    from kernel_check import with_mistake
    return with_mistake(gemv_q8_0_kernel(), "acc += __shfl_xor_sync(0xffffffffu, acc, o);", ";")


WRONG = {"test_ch11_1_tiled_matmul": {"drops-partial-k": {"tiled_matmul": _whole_tiles_only}},
         "test_ch11_2_q8_0_gemv": {"no-scale": {"q8_0_gemv": _no_scale}},
         "test_ch11_3_gemv_q8_0_kernel": {"no-reduction": {"gemv_q8_0_kernel": _lane_zero_only}}}
