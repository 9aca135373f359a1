#!/usr/bin/env python3
"""Flash attention prefill against torch SDPA, side by side in one process (issue 13's target):
causal, Qwen3-8B's heads (32 query, 8 kv, head dim 128), batch 1, at 512 ... 4096 tokens.

    python benchmarks/bench_attention.py [--lengths 512 1024 2048 4096] [--json out.json] [--vt0] [--rounds 5]

Each contender is 10 calls captured once in a CUDA graph and replayed (ours: chapter 11's CudaGraph
of PyCUDA launches; torch: torch.cuda.CUDAGraph), so kernels are compared with kernels. The GPU's
clocks drift by several percent between one measurement and the next, so every contender is timed
once per round, the rounds interleaved, and each reports its median over the rounds and its spread
(slowest / fastest round): a difference smaller than the spread is noise. Ours: the default
(`FLASH_HOPPER` on an H100/H200) and version 4 with V^T, 3 and 4 stages, and without its overlap of
the two products; with --vt0 also version 4 reading V as it lands (no V^T, 4 and 6 stages), in
tiles of 128 keys (2 and 3 stages), with the consumer warpgroups' ping-pong, and with the grid heads
first (GRID_HQ). torch: the faster of `enable_gqa=True` and K/V repeated to 32 heads. Every output
is checked against torch's first (relative Frobenius error). Needs an H100/H200, PyCUDA and torch.
"""
import argparse
import json
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
HQ, HKV, D, INNER = 32, 8, 128, 10


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lengths", type=int, nargs="*", default=[512, 1024, 2048, 4096])
    ap.add_argument("--json", type=pathlib.Path)
    ap.add_argument("--vt0", action="store_true", help="also version 4's other configurations (VT=0, BN=128, PINGPONG, GRID_HQ)")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds; each contender reports its median")
    a = ap.parse_args()
    import pycuda.driver as drv
    import pycuda.gpuarray as ga
    import torch
    import torch.nn.functional as F
    from tffedu.ops.cuda import CudaGraph, context, time_ms
    from tffedu.ops.cuda_attention import flash_launch
    context()
    stream, rng, rows = drv.Stream(), np.random.default_rng(0), []

    def graph(call):
        call()                                              # compiled, warm
        return CudaGraph(lambda: [call() for _ in range(INNER)], stream).replay, stream

    def torch_graph(fn):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                fn()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(INNER):
                fn()
        torch.cuda.synchronize()
        return g.replay, None                               # replayed on torch's (the legacy default) stream

    for L in a.lengths:
        q, k, v = (rng.standard_normal((L, H, D)).astype(np.float16) for H in (HQ, HKV, HKV))
        t = lambda x: torch.from_numpy(x).cuda().transpose(0, 1).unsqueeze(0).contiguous()  # noqa: E731
        tq, tk, tv = t(q), t(k), t(v)
        tkr, tvr = tk.repeat_interleave(HQ // HKV, 1), tv.repeat_interleave(HQ // HKV, 1)
        ref = F.scaled_dot_product_attention(tq, tkr, tvr, is_causal=True)[0].transpose(0, 1).float().cpu().numpy()
        flops = 2 * L * L * D * HQ                           # 4 L^2 D H, halved by the mask
        replays = {"sdpa gqa": (*torch_graph(lambda: F.scaled_dot_product_attention(tq, tk, tv, is_causal=True,
                                                                                      enable_gqa=True)), None),
                   "sdpa repeat": (*torch_graph(lambda: F.scaled_dot_product_attention(tq, tkr, tvr,
                                                                                         is_causal=True)), None)}
        qd, kd, vd, od = ga.to_gpu(q), ga.to_gpu(k), ga.to_gpu(v), ga.empty((L, HQ, D), np.float32)
        runs = [("default", {}), ("v4 s3", dict(version=4, config={"STAGES": 3})),
                ("v4 s4", dict(version=4, config={"STAGES": 4})),
                ("v4 s3 no overlap", dict(version=4, config={"STAGES": 3, "OVERLAP": 0}))]
        if a.vt0:
            runs += [(f"v4 no V^T s{st}", dict(version=4, config={"STAGES": st, "VT": 0})) for st in (4, 6)]
            runs += [(f"v4 no V^T BN128 s{st}", dict(version=4, config={"STAGES": st, "VT": 0, "BN": 128}))
                     for st in (2, 3)]
            runs += [("v4 s3 ping-pong", dict(version=4, config={"STAGES": 3, "PINGPONG": 1})),
                     ("v4 no V^T BN128 s2 ping-pong", dict(version=4, config={"STAGES": 2, "VT": 0, "BN": 128,
                                                                             "PINGPONG": 1})),
                     ("v4 no V^T BN128 s2 heads-first", dict(version=4, config={
                         "STAGES": 2, "VT": 0, "BN": 128, "GRID_HQ": 1})),
                     ("v4 no V^T BN128 s2 ping-pong heads-first", dict(version=4, config={
                         "STAGES": 2, "VT": 0, "BN": 128, "PINGPONG": 1, "GRID_HQ": 1}))]
        for name, kw in runs:
            call = lambda kw=kw: flash_launch(int(qd.gpudata), int(kd.gpudata), int(vd.gpudata),  # noqa: E731
                                              int(od.gpudata), 1, L, L, HQ, HKV, D, None, True, stream, **kw)
            try:
                od.fill(np.float32(np.nan))
                call()
                stream.synchronize()
                got = od.get()
                err = float(np.linalg.norm(got - ref) / np.linalg.norm(ref)) if np.isfinite(got).all() else float("inf")
                replays[name] = (*graph(call), err)
            except Exception as e:                          # reported, the other rows still run
                print(f"L={L} {name}: {type(e).__name__}: {str(e)[:300]}")
        times = {name: [] for name in replays}
        for _ in range(a.rounds):                           # interleaved: clock drift hits every contender
            for name, (replay, on, _) in replays.items():
                times[name].append(time_ms(replay, warmup=3, reps=20, stream=on) / INNER)
        med = {name: float(np.median(t)) for name, t in times.items()}
        fast = min(("sdpa gqa", "sdpa repeat"), key=med.get)
        sdpa = med[fast]
        row = dict(L=L, sdpa_ms=sdpa, sdpa_tflops=flops / sdpa / 1e9, sdpa=fast,
                   sdpa_spread=max(times[fast]) / min(times[fast]), sdpa_rounds=times[fast])
        for name, (_, _, err) in replays.items():
            if err is not None:
                row[name] = dict(ms=med[name], tflops=flops / med[name] / 1e9, err=err, vs_sdpa=sdpa / med[name],
                                 spread=max(times[name]) / min(times[name]), rounds=times[name])
        rows.append(row)
        print(f"L={L:5d} torch SDPA {sdpa:.4f} ms ({row['sdpa_tflops']:.0f} TFLOP/s, spread "
              f"{100 * (row['sdpa_spread'] - 1):.1f}%)  " + "  ".join(
            f"{n}: {r['ms']:.4f} ms {r['tflops']:.0f} TFLOP/s {r['vs_sdpa']:.2f}x of SDPA's speed "
            f"(spread {100 * (r['spread'] - 1):.1f}%) err {r['err']:.1e}"
            for n, r in row.items() if isinstance(r, dict)), flush=True)
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
