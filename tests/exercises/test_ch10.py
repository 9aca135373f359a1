"""Chapter 10 exercises: launch configuration (reference: math.ceil) and a warp's shuffle
reduction (reference: the same tree as halving reshapes, bit for bit, and math.fsum), and on a GPU
the learner's silu_mul kernel (reference: numpy in float64)."""
import math

import numpy as np
import pytest


def test_ch10_1_launch_config(impl):
    for n in (1, 255, 256, 257, 10**6, 2**31):
        for block in (32, 128, 256, 1024):
            grid, b = impl.launch_config(n, block)
            assert b == block and grid == math.ceil(n / block), (n, block)
    with pytest.raises(ValueError):
        impl.launch_config(2**40, 32, max_grid=2**31 - 1)


def test_ch10_2_warp_reduce_sum(impl):
    rng = np.random.default_rng(0)
    for _ in range(50):
        x = (rng.standard_normal(32) * 10.0 ** rng.integers(-3, 6, 32)).astype(np.float32)
        v = x.copy()
        for half in (16, 8, 4, 2, 1):               # lane i += lane i + half, for the lanes that matter
            v = (v[:half] + v[half:2 * half]).astype(np.float32)
        got = np.asarray(impl.warp_reduce_sum(x))
        assert got.shape == (32,), f"warp_reduce_sum({x!r}) should give 32 lane values, got shape {got.shape}"
        # lane 0 adds in the order of the halving tree; every lane ends with a sum of the same pairs
        assert got.astype(np.float32)[0].tobytes() == v[0].tobytes(), f"lane 0 of warp_reduce_sum({x!r})"
        assert np.allclose(got, math.fsum(map(float, x)), rtol=0, atol=32 * np.finfo(np.float32).eps * np.abs(x).sum()), \
            f"every lane holds the sum of {x!r}"


@pytest.mark.gpu
def test_ch10_3_silu_mul_kernel(impl):
    from kernel_check import launch_file, to_gpu
    path = impl.silu_mul_kernel()
    rng = np.random.default_rng(3)
    for n in (1, 1000, 100_003):                     # more elements than the 64 x 256 threads launched
        gate, up = (rng.standard_normal((2, n)) * 4).astype(np.float32)
        out = to_gpu(np.full(n, np.nan, np.float32))
        launch_file(path, "silu_mul", "PPPi", (min(64, -(-n // 256)),), (256,), to_gpu(gate), to_gpu(up), out, np.int32(n))
        g = gate.astype(np.float64)
        np.testing.assert_allclose(out.get(), g / (1 + np.exp(-g)) * up, rtol=1e-5, atol=1e-6, err_msg=f"n={n}")


def _one_pass():
    from solutions.ch10 import silu_mul_kernel
    from kernel_check import with_mistake
    return with_mistake(silu_mul_kernel(), "i += gridDim.x * blockDim.x", "i += 1 << 30")


WRONG = {"test_ch10_1_launch_config": {"floor": {"launch_config": lambda n, block=256, max_grid=2**31 - 1: (n // block, block)}},
         "test_ch10_2_warp_reduce_sum": {"sequential": {"warp_reduce_sum": lambda lanes: np.float32(
             np.cumsum(np.asarray(lanes, np.float32), dtype=np.float32)[-1])}},
         "test_ch10_3_silu_mul_kernel": {"no-grid-stride": {"silu_mul_kernel": _one_pass}}}
