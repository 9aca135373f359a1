#!/usr/bin/env python3
"""Tilings chosen where they run: the whole replayed decode step of one sequence, GPU time only.

    python benchmarks/sweep_decode_step.py MODEL.gguf [--gemv] [--direct] [--attn] [--json out.json]

A GEMV tiling that wins alone (chapter 11's sweep) need not win in a step, where the kernel before
it is still draining and programmatic dependent launch overlaps the two. So each candidate is put
into the real step and the step's CUDA graph is replayed and timed (median of 40 replays):
--gemv: batch-1 (rows, warps, stages) of GEMV v3 for each matrix role of a block (q/k/v in one
launch, the o-projection and the down projection with their residual add, gate/up with SwiGLU,
the output head), one role at a time against the defaults, then the best of each together;
--direct: chapter 11c's direct road (the 4-, 5- and 6-bit formats) at one token: each DIRECT_GEMV
entry for every matrix at once (a model of those formats: `make_gguf.py --type q4_0`, or a K-quant file);
--attn: the decode attention's keys per split (VARLEN_SPLIT), UNROLL and NWARPS at depth 2048 and 0.
"""
import argparse
import json
import pathlib
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# (rows, warps, stages) tried for each role, besides the default
GEMV_CANDIDATES = {"gate/up": [(2, 4, 2), (2, 2, 2), (1, 8, 2), (2, 4, 3), (4, 2, 2), (1, 4, 3), (2, 8, 2)],
                   "down": [(2, 2, 3), (2, 4, 3), (2, 2, 4), (1, 4, 4), (4, 2, 3), (2, 4, 4), (1, 8, 3)],
                   "qkv": [(2, 4, 2), (4, 4, 2), (2, 2, 3), (4, 2, 2), (1, 4, 4), (2, 4, 3), (1, 8, 2)],
                   "o": [(2, 4, 2), (4, 2, 2), (2, 2, 3), (1, 4, 4), (4, 4, 2), (2, 4, 3), (1, 8, 2)],
                   "head": [(1, 4, 4), (2, 4, 2), (1, 8, 2)]}
# (rows, warps, steps in flight) of the direct road at one token
DIRECT_CANDIDATES = [(1, 4, 1), (1, 4, 2), (1, 4, 3), (2, 4, 1), (2, 4, 2), (1, 8, 2), (1, 2, 2), (2, 2, 1)]
# (keys per split, UNROLL, NWARPS) of the decode attention
ATTN_CANDIDATES = [(s, u, w) for s in (128, 256, 512) for u, w in ((4, 8), (8, 8), (4, 4), (8, 4), (2, 8), (16, 4))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", type=pathlib.Path)
    ap.add_argument("--gemv", action="store_true")
    ap.add_argument("--direct", action="store_true")
    ap.add_argument("--attn", action="store_true")
    ap.add_argument("--json", type=pathlib.Path)
    a = ap.parse_args()

    import tffedu
    from tffedu.engine import Engine
    from tffedu.ops import cuda_attention as ca
    from tffedu.ops import cuda_gemm as gm
    from tffedu.ops import cuda_quant as cq
    from tffedu.ops.cuda import time_all

    model = tffedu.load(a.model, device="cuda", n_ctx=4096)
    c = model.config
    eng = Engine(model, max_batch=1, prefix_caching=False, token_budget=2049)
    rng = np.random.default_rng(0)
    override = {}                                   # (epilogue, N, K) -> (rows, warps, stages)
    plain = gm.q8_0_gemv_launcher

    def launcher(w, x, y, N, K, T=1, version="dp4a", stream=None, rows=None, warps=None, stages=None, **kw):
        ep = "pair" if kw.get("w2") is not None else "res" if kw.get("res") is not None else \
            "cat" if kw.get("cat") is not None else None
        if rows is None and int(T) == 1 and version == "dp4a" and (ep, int(N), int(K)) in override:
            rows, warps, stages = override[ep, int(N), int(K)]
        return plain(w, x, y, N, K, T, version, stream, rows=rows, warps=warps, stages=stages, **kw)
    gm.q8_0_gemv_launcher = launcher

    def step_ms(depth: int) -> float:
        "The replayed decode step after `depth` tokens, planned and captured afresh."
        eng.runner.executors.clear()
        eng.runner.captured.clear()
        req = eng.add(rng.integers(0, c.vocab_size, depth + 1).tolist(), max_new_tokens=8, ignore_eos=True)
        while not req.done:
            eng.step()
        ex, g = eng.runner.last_captured("decode")
        return float(np.median(time_all(g.replay, warmup=5, reps=40, stream=ex.stream)))

    out = dict(model=a.model.name, gemv=[], direct=[], attn=[])
    if a.gemv:
        qkv = c.n_head * c.head_dim
        roles = {"gate/up": ("pair", c.ffn_size, c.hidden_size), "down": ("res", c.hidden_size, c.ffn_size),
                 "qkv": ("cat", qkv, c.hidden_size), "o": ("res", c.hidden_size, qkv),
                 "head": (None, c.vocab_size, c.hidden_size)}
        best = {}
        for name, role in roles.items():
            override.clear()
            base = step_ms(0)
            for cfg in GEMV_CANDIDATES[name]:
                override[role] = cfg
                t = step_ms(0)
                out["gemv"].append(dict(role=name, cfg=cfg, ms=t, base_ms=base))
                print(f"{name:8s} r{cfg[0]}w{cfg[1]}s{cfg[2]}: {t:.4f} ms, defaults {base:.4f} ({100 * (t / base - 1):+.2f}%)",
                      flush=True)
            rs = [r for r in out["gemv"] if r["role"] == name]
            top = min(rs, key=lambda r: r["ms"])
            if top["ms"] < 0.997 * base:
                best[name] = top["cfg"]
        override.clear()
        base = step_ms(0)
        override.update({roles[n]: cfg for n, cfg in best.items()})
        together = step_ms(0)
        out["best"] = dict(cfg=best, ms=together, base_ms=base)
        print(f"best of each together {best}: {together:.4f} ms, defaults {base:.4f} "
              f"({100 * (together / base - 1):+.2f}%)", flush=True)
        override.clear()
    if a.direct:
        direct0 = dict(cq.DIRECT_GEMV)
        for cfg in DIRECT_CANDIDATES:
            cq.DIRECT_GEMV[1] = cfg
            t = step_ms(0)
            out["direct"].append(dict(cfg=cfg, ms=t))
            print(f"direct road r{cfg[0]}w{cfg[1]}s{cfg[2]}: {t:.4f} ms", flush=True)
        cq.DIRECT_GEMV.clear()
        cq.DIRECT_GEMV.update(direct0)
    if a.attn:
        split0, dec0 = ca.VARLEN_SPLIT, dict(ca.DECODE)
        for depth in (2048, 0):
            for s, u, w in ATTN_CANDIDATES:
                ca.VARLEN_SPLIT = s
                ca.DECODE.update(UNROLL=u, NWARPS=w)
                t = step_ms(depth)
                out["attn"].append(dict(depth=depth, split=s, unroll=u, warps=w, ms=t))
                print(f"depth {depth} split {s} unroll {u} warps {w}: {t:.4f} ms", flush=True)
        ca.VARLEN_SPLIT = split0
        ca.DECODE.update(dec0)
    if a.json:
        a.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
