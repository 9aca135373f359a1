#!/usr/bin/env python3
"""Chapter 11's Q8_0 matmuls side by side on Qwen3-8B's shapes: GEMV v3, versions 6 and 7 (Q8_0 into
wgmma; 7: fed by TMA), the slab path (dequantize + v5) and cuBLAS fp16 (torch), microseconds per call
from CUDA graphs.

    python benchmarks/bench_q8_gemm.py                  # the chapter's table
    python benchmarks/bench_q8_gemm.py --sweep          # + the other tiles and K splits of both
    python benchmarks/bench_q8_gemm.py --batches 16 32 --json out.json
    python benchmarks/bench_q8_gemm.py --mmq            # + the int8 tensor-core GEMM (q8_mmq)
Needs an NVIDIA H100/H200 (sm_90), PyCUDA and torch.
"""
import argparse
import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))


def sweep_configs(M):
    """Launches to try besides the chosen one, of versions 6 and 7. Few tokens (M <= 128): the small
    tiles, K split 1..16 (and version 6's other rings). Many: the 128- and 256-token tiles, K split 1..4."""
    from tffedu.ops import cuda_q8_gemm as qm
    big = M > 128
    tiles = (128, 256) if big else (16, 32, 64)
    out = [dict(V=v, BT=b, splits=s) for v in (6, 7) for b in tiles for s in ((1, 2, 3, 4) if big else (1, 2, 4, 8, 16))]
    return out + [dict(c, V=6, splits=s) for c in qm.Q8_GEMM_CONFIGS if c["BT"] in tiles
                  and {k: c[k] for k in ("SK", "STAGES", "LATE")} != qm.Q8_GEMM_TILES.get(c["BT"]) for s in (1, 2)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sweep", action="store_true")
    ap.add_argument("--batches", type=int, nargs="*")
    ap.add_argument("--json")
    ap.add_argument("--small", action="store_true", help="also Qwen3-0.6B's FFN shapes")
    ap.add_argument("--mmq", action="store_true", help="also the int8 tensor-core GEMM (q8_mmq)")
    a = ap.parse_args()
    from tffedu.ops import cuda_q8_gemm as qm
    batches = tuple(a.batches or qm.Q8_GEMM_BATCHES)
    global SHAPES
    SHAPES = qm.QWEN3_8B_GEMM_SHAPES + ([(1024, 3072), (3072, 1024)] if a.small else [])
    rows = []
    for M in batches:     # configs per M: only the tiles that are not much wider than M
        cfgs = sweep_configs(M) if a.sweep and M > 1 else ()
        rows += qm.bench_q8_gemm(batches=(M,), configs=cfgs, reps=5, shapes=SHAPES, mmq=a.mmq)
    key = lambda r: (r["K"], r["N"], r["M"], r["us"])
    for (K, N, M) in sorted({(r["K"], r["N"], r["M"]) for r in rows}):
        rs = sorted((r for r in rows if (r["K"], r["N"], r["M"]) == (K, N, M)), key=key)
        best = rs[0]
        print(f"{K:5d}->{N:<6d} M={M:5d}  " + "  ".join(
            f"{r['name']}: {r['us']:.1f}us {r['gbs']:.0f}GB/s {r['tflops']:.0f}TF" for r in rs[:6]) +
            f"   (best {best['name']})")
        bad = [r for r in rs if r["err"] > 2e-5 * (K / 4096) ** 0.5 and r["name"][:2] in ("v6", "v7")]
        bad += [r for r in rs if r["name"].startswith("mmq") and r["err"] > 2e-2]   # int8 activations
        if bad:
            print("   !! error", [(r["name"], r["err"]) for r in bad])
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
