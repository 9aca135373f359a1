#!/usr/bin/env python3
"""Chapter 11c's GEMV on the GPU: GB/s of weights for each block format, batch and tiling
(rows per warp, warps per block, pipeline stages), on Qwen3-8B's shapes, against chapter 11's Q8_0
GEMV on the same weights. Every launch reads weights that are not in L2 (copies rotated), replayed
from a CUDA graph as a decode step runs it.

    python benchmarks/sweep_quant_gemv.py [--out benchmarks/results/quant_gemv_sweep_h200.json]
"""
import argparse
import json
import pathlib
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SHAPES = [(4096, 12288), (12288, 4096)]                      # (K, N): gate/up, down
CONFIGS = [None, (1, 4, 4), (1, 4, 6), (1, 4, 8), (1, 8, 4), (1, 8, 6), (2, 4, 4), (2, 4, 6), (2, 2, 8),
           (4, 2, 4)]                                          # None: chapter 11's gemv_config


def main():
    import pycuda.driver as drv
    import pycuda.gpuarray as ga
    from tffedu.ops.cuda import CudaGraph, context, copy_bandwidth, device_info, time_ms
    from tffedu.ops.cuda_gemm import q8_0_gemv_launcher
    from tffedu.ops.cuda_quant import DIRECT_TYPES, _tile_vec, quant_gemv_launcher
    from tffedu.ops.cuda_quant import quantize_gpu as quantize     # a repacked type: the file's, repacked

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=pathlib.Path, default=ROOT / "benchmarks/results/quant_gemv_sweep_h200.json")
    ap.add_argument("--types", default="Q4_K,Q6_K")
    ap.add_argument("--batches", default="1")
    ap.add_argument("--configs", default=None, help="rows,warps,stages;... (default: CONFIGS; the direct "
                    "road (DIRECT_TYPES) reads stages as steps of four super-blocks in flight)")
    ap.add_argument("--no-prefill", action="store_true", help="the GEMV only")
    a = ap.parse_args()
    configs = [None] + [tuple(int(v) for v in c.split(",")) for c in a.configs.split(";")] if a.configs else CONFIGS
    context()
    from benchmarks.bench_matmul import precompile     # every variant the sweep runs, compiled in parallel
    from tffedu.ops.cuda_quant import gemv_defines, quant_gemv_config
    precompile(vs=[(None, "gemv_quant.cu", gemv_defines(wk, T, *(cfg or quant_gemv_config(T, K, None, wk in DIRECT_TYPES)),
                                                        wk in DIRECT_TYPES))
                   for wk in a.types.split(",") for T in map(int, a.batches.split(",")) for K, _ in SHAPES
                   for cfg in configs if wk in DIRECT_TYPES or not cfg or cfg[2] >= 2])
    rng = np.random.default_rng(0)
    copy = copy_bandwidth() / 2
    rows = []

    def gbs(launch_of, raw, N, K, T):
        n = max(2, -(-4 * device_info()["l2_bytes"] // raw.nbytes))
        copies = [ga.to_gpu(raw) for _ in range(n)]
        x, y, s = ga.to_gpu(rng.standard_normal((T, K)).astype(np.float32)), ga.empty((T, N), np.float32), drv.Stream()
        launches = [launch_of(c, x, y, s) for c in copies]
        g = CudaGraph(lambda: [fn() for fn in launches], s)
        ms = time_ms(g.replay, warmup=2, reps=10, stream=s) / n
        return raw.nbytes / (ms * 1e-3) / 1e9

    for K, N in SHAPES:
        w = (rng.standard_normal((64, K)) * 0.05).astype(np.float32)   # 64 rows quantized, tiled to N
        for T in (int(t) for t in a.batches.split(",")):
            q8 = np.resize(quantize(w, "Q8_0"), (N, K // 32 * 34))
            rows.append(dict(type="Q8_0", K=K, N=N, T=T, cfg=None,
                             gbs=gbs(lambda c, x, y, s: q8_0_gemv_launcher(c, x, y, N, K, T, "dp4a", s), q8, N, K, T)))
            print(rows[-1], flush=True)
            for wk in a.types.split(","):
                raw = quantize(w, wk)
                raw = np.resize(raw, (N, raw.shape[1]))
                for cfg in configs:
                    kw = dict(zip(("rows", "warps", "stages"), cfg)) if cfg else {}
                    if cfg and wk not in DIRECT_TYPES and cfg[0] * cfg[1] * cfg[2] * _tile_vec(wk) * 16 > 48 * 1024:
                        continue
                    try:
                        v = gbs(lambda c, x, y, s: quant_gemv_launcher(c, wk, x, y, N, K, T, s, **kw), raw, N, K, T)
                    except Exception as e:            # a tiling the kernel refuses: reported, not fatal
                        print(f"{wk} {cfg}: {type(e).__name__}: {e}")
                        continue
                    rows.append(dict(type=wk, K=K, N=N, T=T, cfg=cfg, gbs=v))
                    print(rows[-1], flush=True)
    # prefill at 512 tokens: the slab road (dequantize rows to fp16, then version 5) against version 7
    # from the blocks, and chapter 11's version 7 on Q8_0 of the same shape
    from tffedu.ops.cuda_gemm import q8_0_slab_rows
    from tffedu.ops.cuda_q8_gemm import q8_gemm, q8_gemm_part_bytes
    from tffedu.ops.cuda_quant import quant_gemm, quant_gemm_available, slab_gemm
    prefill = []
    M = 512
    for K, N in [] if a.no_prefill else SHAPES + [(4096, 4096), (4096, 1024)]:
        w = (rng.standard_normal((64, K)) * 0.05).astype(np.float32)
        xh = ga.to_gpu(rng.standard_normal((M, K)).astype(np.float16))
        y = ga.empty((M, N), np.float32)
        part = ga.empty(max(1, q8_gemm_part_bytes(M, N, K, V=7) // 4), np.float32)
        for wk in ["Q8_0"] + a.types.split(","):
            raw = ga.to_gpu(np.resize(quantize(w, wk), (N, quantize(w, wk).shape[1])))
            runs = {}
            if wk == "Q8_0":
                runs["v7"] = lambda: q8_gemm(xh, raw, y, M, N, K, dict(V=7), part=part)
            else:
                wh = ga.empty((q8_0_slab_rows(N, K), K), np.float16)
                runs["slab"] = lambda: slab_gemm(xh, raw, wk, y, M, N, K, wh)
                if quant_gemm_available(wk, K):
                    runs["v7"] = lambda: quant_gemm(xh, raw, wk, y, M, N, K, part=part)
            for how, fn in runs.items():
                ms = time_ms(fn, warmup=3, reps=20)
                prefill.append(dict(type=wk, how=how, K=K, N=N, M=M, ms=ms, tflops=2 * M * N * K / (ms * 1e-3) / 1e12))
                print(prefill[-1], flush=True)
    a.out.write_text(json.dumps({"copy_read_gbs": copy, "rows": rows, "prefill": prefill}, indent=1) + "\n")
    best = {}
    for r in rows:
        k = (r["type"], r["K"], r["N"], r["T"])
        if k not in best or r["gbs"] > best[k]["gbs"]:
            best[k] = r
    for k, r in sorted(best.items()):
        print(f"{k}: best {r['cfg']} {r['gbs']:.0f} GB/s ({r['gbs'] / copy:.0%} of the copy)")


if __name__ == "__main__":
    main()
