#!/usr/bin/env python3
"""Chapter 11 benchmarks: the GEMM ladder at 4096^3 and the Q8_0 GEMV on Qwen3-8B shapes.

    python benchmarks/bench_matmul.py                 # run both, print tables, write bench_matmul.json
    python benchmarks/bench_matmul.py --precompile    # compile every kernel variant in parallel (fills
                                                      # PyCUDA's disk cache: later runs start fast)
Needs an NVIDIA GPU, PyCUDA and torch (cuBLAS is timed through torch.matmul).
"""
import argparse
import json
import os
import pathlib
import sys
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def variants():
    "Every (file, defines) the tests, the notebook and the benchmarks compile."
    from tffedu.ops import cuda_gemm as gm
    from tffedu.ops import cuda_q8_gemm as qm
    v = [("ladder/matmul_naive.cu", {}), ("matmul_mma.cu", {}), ("gemv_q8_0.cu", {}),
         ("matmul_regblock.cu", {"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8})]
    v += [("ladder/matmul_tiled.cu", {"TILE": t}) for t in (8, 16, 32)]
    v += [("matmul_mma.cu", dict(c)) for c in gm.MMA_CONFIGS]
    g = lambda T, r, w, s: ("gemv_q8_0.cu", {"BATCH": T, "ROWS": r, "WARPS": w, "NSTAGE": s})
    for T in range(1, 9):
        v.append(("gemv_q8_0.cu", {"BATCH": T, "WARPS": 4}))
        v.append(g(T, *gm.gemv_config(T)))
    for T in (1, 8):
        v += [g(T, *c) for c in gm.GEMV_SWEEP]
    v += [g(5, *c) for c in ((1, 2, 2), (2, 4, 3), (4, 2, 4), (4, 1, 2), (1, 8, 4), (2, 2, 4))]
    v += [g(1, *c) for c in gm.PERSIST_SWEEP]          # v4 (same file and defines as v3)
    v += [g(T, *c) for T in (1, 3) for c in ((1, 4, 2), (1, 4, 4), (2, 4, 2), (4, 2, 2), (1, 8, 2), (2, 2, 3))]
    v += [("sm_90a", "matmul_wgmma.cu", dict(c)) for c in gm.WGMMA_CONFIGS]
    v += [("sm_90a", "matmul_q8_wgmma.cu", dict(c)) for c in qm.Q8_GEMM_CONFIGS]
    # chapter 11c: the GEMV of every block format at every batch, and version 7 of each (every tile, pair mode)
    from tffedu.ops import cuda_quant as cq
    for wk in cq.QUANT_TYPES:
        for T in range(1, 9):
            for ep in (None, "pair", "res"):
                for direct in (0, 1) if wk in cq.DIRECT_TYPES else (0,):
                    v.append(("gemv_quant.cu", cq.gemv_defines(wk, T, *cq.quant_gemv_config(T, 4096, ep, direct), direct)))
        for BT in (16, 32, 64, 128, 256):
            for pair in (0, 1, 2):
                v.append(("sm_90a", "matmul_quant_tma.cu", dict(BT=BT, STAGES=qm.q8_tma_stages(BT, cq.quant_w_box(wk)),
                                                                GROUP=qm.Q8_TMA_GROUP, PAIR=pair, **qm.TMA_GEMMS[wk].defines)))
    # chapter 12's flash attention: the tile shapes and switches its tests and notebook compile
    fl = [{}, dict(NWARPS=4, BC=64), dict(NWARPS=4, BC=32), dict(NWARPS=8, BC=64), dict(NWARPS=8, BC=32),
          dict(NWARPS=4, BC=64, MINB=3), dict(NWARPS=2, BC=64), dict(NWARPS=2, BC=32),
          dict(NWARPS=8, BC=64, GRID_HQ=1), dict(NWARPS=4, BC=64, GRID_HQ=1), dict(NWARPS=4, BC=64, KV2=1),
          dict(NWARPS=4, BC=64, KV2=1, GRID_HQ=1), dict(NWARPS=4, BC=32, KV2=1, GRID_HQ=1),
          dict(NWARPS=2, BC=64, KV2=1, GRID_HQ=1)]
    v += [("flash_attn.cu", {**c, "HEAD_DIM": d}) for c in fl for d in (64, 128)]
    # the model path (chapter 13): the memory-bound kernels, decode attention per head dim and GQA
    # group, flash attention and the naive kernel at the small head dims of the test models
    v += [("elementwise.cu", {}), ("embedding.cu", {}), ("argmax.cu", {}), ("argmax.cu", {"ARGMAX_CHUNK": 2048}),
          ("rope.cu", {}),
          ("rope.cu", {"QKN_WARPS": 4}), ("rmsnorm.cu", {"BLOCK": 256}), ("softmax.cu", {"BLOCK": 256}),
          ("softmax.cu", {"BLOCK": 1024}), ("paged_attn.cu", {})]
    for d in (16, 64, 128):
        v.append(("paged_attn.cu", {"HEAD_DIM": d}))
        for g_ in (1, 2, 4, 8):
            for nw in (8, 4):
                v.append(("paged_attn.cu", {"NWARPS": nw, "UNROLL": 4, "HEAD_DIM": d, "GROUP": g_}))
        v += [("flash_attn.cu", {"NWARPS": 4, "BC": 64, "HEAD_DIM": d}),
              ("flash_attn.cu", {"NWARPS": 4, "BC": 64, "KV2": 1, "GRID_HQ": 1, "HEAD_DIM": d})]
    v += [("flash_attn.cu", {"HEAD_DIM": d}) for d in (16, 24, 40, 64, 128)]
    seen, out = set(), []
    for item in v:
        arch = item[0] if len(item) == 3 else None
        f, d = item[-2:]
        key = (arch, f, tuple(sorted((str(k), str(x)) for k, x in d.items())))
        if key not in seen:
            seen.add(key)
            out.append((arch, f, d))
    return out


def precompile(jobs: int = 16, vs: list | None = None):
    """Compile `vs` ((arch or None, file, defines) triples; default: `variants()`) with exactly the
    options of tffedu.ops.cuda.load_module, so its cache hits later."""
    from pycuda.compiler import compile as nvcc_compile
    from tffedu.ops.cuda import context, device_arch, kernels_dir
    context()
    arch, kd = device_arch(), kernels_dir()

    def one(afd):
        a, f, d = afd
        defs = tuple(sorted((str(k), str(v)) for k, v in d.items()))
        opts = [f"-D{k}={v}" for k, v in defs] + ["-std=c++17", "-lineinfo"]
        t0 = time.time()
        nvcc_compile((kd / f).read_text(), options=opts, no_extern_c=True, arch=a or arch, include_dirs=[str(kd)])
        return f, d, time.time() - t0

    t0 = time.time()
    vs = variants() if vs is None else vs
    with ThreadPoolExecutor(jobs) as ex:
        for f, d, dt in ex.map(one, vs):
            pass
    print(f"precompiled {len(vs)} kernel variants in {time.time() - t0:.1f} s")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--precompile", action="store_true")
    ap.add_argument("--out", default=os.environ.get("TFFEDU_BENCH_OUT", "bench_matmul.json"))
    ap.add_argument("--no-sweep", action="store_true")
    a = ap.parse_args()
    if a.precompile:
        precompile()
        return
    from tffedu.ops import cuda_gemm as gm
    from tffedu.ops.cuda import copy_bandwidth, device_info
    info = device_info()
    copy = copy_bandwidth(1 << 30)
    gemm = gm.bench_gemm(4096, 4096, 4096)
    gemv = gm.bench_gemv(sweep=not a.no_sweep)
    print(f"{info['name']}: device-to-device copy {copy:.0f} GB/s")
    print(f"{'GEMM 4096^3':44s} {'ms':>8s} {'TFLOP/s':>8s}")
    for r in gemm:
        print(f"{r['name']:44s} {r['ms']:8.3f} {r['tflops']:8.1f}")
    print("plain: a loop of launches from Python; graph: the same loop captured in a CUDA graph and replayed")
    print(f"{'Q8_0 GEMV':14s} {'T':>2s} {'version':28s} {'plain us':>8s} {'% copy':>7s} {'graph us':>8s} {'% copy':>7s}")
    for r in sorted(gemv, key=lambda r: (r["K"], r["N"], r["T"])):
        if not r["sweep"]:
            print(f"{r['K']:6d}->{r['N']:<7d} {r['T']:2d} {r['name']:28s} {r['ms'] * 1e3:8.1f} "
                  f"{100 * r['gbs'] / copy:6.0f}% {r['ms_graph'] * 1e3:8.1f} {100 * r['gbs_graph'] / copy:6.0f}%")
    with open(a.out, "w") as f:
        json.dump(dict(device=info["name"], copy_gbs=copy, gemm=gemm, gemv=gemv), f, indent=1)


if __name__ == "__main__":
    main()
