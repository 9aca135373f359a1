#!/usr/bin/env python3
"""GEMV v3 with and without its epilogues at Qwen3-8B's decode shapes (batch 1), replayed from CUDA
graphs with the weights rotated past the L2 (as a decode step meets them):

    python benchmarks/bench_epilogues.py

Rows: the unfused launches (quantize + GEMV [+ add | + second GEMV + swiglu]) against the fused
one, µs per call and GB/s of weights.
"""
import math
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))


def main():
    import pycuda.driver as drv
    import pycuda.gpuarray as ga
    from tffedu.factory import OPS
    from tffedu.ops import cuda_gemm as gm
    from tffedu.ops.cuda import CudaGraph, context, device_info, time_ms
    context()
    stream = drv.Stream()
    rng = np.random.default_rng(0)
    l2 = device_info()["l2_bytes"]
    swiglu = OPS.get("swiglu", "cuda")
    print(f"{'K->N':>12} {'T':>2} {'what':<34} {'us':>7} {'GB/s':>6}")
    for K, N in ((4096, 4096), (12288, 4096), (4096, 12288), (1024, 3072), (3072, 1024)):
        for T in (1, 4):
            raw = gm.gguf_quantize_rows(rng.standard_normal((min(N, 2048), K), dtype=np.float32))
            full = np.resize(raw, (N, raw.shape[1]))
            wbytes = full.nbytes
            n = max(2, math.ceil(4 * l2 / wbytes))
            w = [ga.to_gpu(full) for _ in range(2 * n)]
            x = ga.to_gpu(rng.standard_normal((T, K), dtype=np.float32))
            r = ga.to_gpu(rng.standard_normal((T, N), dtype=np.float32))
            y, y2 = ga.empty((T, N), np.float32), ga.empty((T, N), np.float32)
            L = lambda wi, out, **kw: gm.q8_0_gemv_launcher(wi, x, out, N, K, T, "dp4a", stream, **kw)  # noqa: E731
            plain = [L(w[i], y) for i in range(n)]
            add = [L(w[i], y, res=r) for i in range(n)]
            pairs = [(L(w[2 * i], y), L(w[2 * i + 1], y2)) for i in range(n)]
            glu = [L(w[2 * i], y, w2=w[2 * i + 1]) for i in range(n)]
            cases = {
                "quantize + GEMV": (lambda: [f() for f in plain], 1),
                "quantize + GEMV + add kernel": (lambda: [(f(), OPS.get("add", "cuda")(y, r, y, stream))
                                                          for f in plain], 1),
                "quantize + GEMV with add (fused)": (lambda: [f() for f in add], 1),
                "2 x (quantize + GEMV) + swiglu": (lambda: [(a(), b(), swiglu(y, y2, y, stream))
                                                            for a, b in pairs], 2),
                "quantize + gate/up GEMV (fused)": (lambda: [f() for f in glu], 2),
            }
            for name, (fn, mats) in cases.items():
                g = CudaGraph(fn, stream)
                ms = time_ms(g.replay, warmup=3, reps=20, stream=stream) / n
                print(f"{K:>5}->{N:<6} {T:>2} {name:<34} {ms * 1e3:7.1f} {mats * wbytes / (ms * 1e-3) / 1e9:6.0f}")
                del g
            del w
    return 0


if __name__ == "__main__":
    sys.exit(main())
