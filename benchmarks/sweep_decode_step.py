#!/usr/bin/env python3
"""Tilings chosen where they run: the whole replayed decode step of one sequence, GPU time only.

    python benchmarks/sweep_decode_step.py MODEL.gguf [--gemv] [--direct] [--attn] [--splits] [--kv-dtype Q8_0]
                                           [--json out.json]

A GEMV tiling that wins alone (chapter 11's sweep) need not win in a step, where the kernel before
it is still draining and programmatic dependent launch overlaps the two. So each candidate is put
into the real step and the step's CUDA graph is replayed and timed (median of 40 replays):
--gemv: batch-1 (rows, warps, stages) of GEMV v3 for each matrix role of a block (q/k/v in one
launch, the o-projection and the down projection with their residual add, gate/up with SwiGLU,
the output head), one role at a time against the defaults, then the best of each together;
--direct: the same for chapter 11c's direct road (the 4-, 5- and 6-bit formats) at one token, the
roles told apart by epilogue and K, so a block's matmuls that are not fused (q, k, v of two types in a
_K_M file) share the head's key (a model of those formats: `make_gguf.py --type q4_0`, or a K-quant
file; DIRECT_GEMV[1] is what a role not overridden takes);
--attn: the decode attention's keys per split (VARLEN_SPLIT), UNROLL and NWARPS at depth 2048 and 0;
--splits: long contexts (the model loaded with room for 32k tokens): the most splits a sequence is cut
into (VARLEN_MAX_SPLITS; 0: splits of VARLEN_SPLIT keys however long) at depths 4k, 16k and 32k,
then UNROLL and NWARPS at 32k with the best bound;
--depths N ...: the step as it is at each depth N (to compare two versions of the code, run each);
--kv-dtype: the K/V pages' type (F16, the default, or Q8_0: 8-bit pages).
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
# (rows, warps, steps in flight) of the direct road at one token, for each role
DIRECT_CANDIDATES = [(1, 4, 1), (1, 4, 2), (1, 4, 3), (2, 4, 1), (2, 4, 2), (1, 8, 2), (1, 2, 2), (2, 2, 1)]
# (keys per split, UNROLL, NWARPS) of the decode attention
ATTN_CANDIDATES = [(s, u, w) for s in (128, 256, 512) for u, w in ((4, 8), (8, 8), (4, 4), (8, 4), (2, 8), (16, 4))]
# the most splits per sequence, and (UNROLL, NWARPS) at 32k tokens
SPLIT_BOUNDS = (0, 16, 32, 64)
LONG_DEPTHS = (4096, 16384, 32768)
LONG_CANDIDATES = [(4, 8), (8, 8), (4, 4), (2, 8), (8, 4), (4, 16)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", type=pathlib.Path)
    ap.add_argument("--gemv", action="store_true")
    ap.add_argument("--direct", action="store_true")
    ap.add_argument("--attn", action="store_true")
    ap.add_argument("--splits", action="store_true")
    ap.add_argument("--depths", type=int, nargs="*", default=[])
    ap.add_argument("--kv-dtype", default=None)
    ap.add_argument("--json", type=pathlib.Path)
    a = ap.parse_args()

    import tffedu
    from tffedu.engine import Engine
    from tffedu.ops import cuda_attention as ca
    from tffedu.ops import cuda_gemm as gm
    from tffedu.ops import cuda_quant as cq
    from tffedu.ops.cuda import time_all

    longest = max([LONG_DEPTHS[-1] if a.splits else 0, *a.depths])
    model = tffedu.load(a.model, device="cuda", n_ctx=max(4096, longest + 256), kv_dtype=a.kv_dtype)
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

    def by_role(kind: str, best_key: str, roles: dict, candidates: dict, over: dict) -> None:
        "Each role's candidates in the step against the defaults (out[kind]), then the best of each together (out[best_key])."
        best = {}
        for name, role in roles.items():
            over.clear()
            base = step_ms(0)
            for cfg in candidates[name]:
                over[role] = cfg
                t = step_ms(0)
                out[kind].append(dict(role=name, cfg=cfg, ms=t, base_ms=base))
                print(f"{name:8s} r{cfg[0]}w{cfg[1]}s{cfg[2]}: {t:.4f} ms, defaults {base:.4f} ({100 * (t / base - 1):+.2f}%)",
                      flush=True)
            top = min((r for r in out[kind] if r["role"] == name), key=lambda r: r["ms"])
            if top["ms"] < 0.997 * base:
                best[name] = top["cfg"]
        over.clear()
        base = step_ms(0)
        over.update({roles[n]: cfg for n, cfg in best.items()})
        together = step_ms(0)
        out[best_key] = dict(cfg=best, ms=together, base_ms=base)
        print(f"best of each together {best}: {together:.4f} ms, defaults {base:.4f} "
              f"({100 * (together / base - 1):+.2f}%)", flush=True)
        over.clear()

    out = dict(model=a.model.name, kv_dtype=model.kv_dtype, gemv=[], direct=[], attn=[], splits=[], depths=[])
    for depth in a.depths:
        t = step_ms(depth)
        out["depths"].append(dict(depth=depth, ms=t))
        print(f"depth {depth}: {t:.4f} ms", flush=True)
    qkv = c.n_head * c.head_dim
    if a.gemv:
        roles = {"gate/up": ("pair", c.ffn_size, c.hidden_size), "down": ("res", c.hidden_size, c.ffn_size),
                 "qkv": ("cat", qkv, c.hidden_size), "o": ("res", c.hidden_size, qkv),
                 "head": (None, c.vocab_size, c.hidden_size)}
        by_role("gemv", "best", roles, GEMV_CANDIDATES, override)
    if a.direct:                                    # the direct road's tiling by (epilogue, K) at one token
        direct_over = {}
        plain_config = cq.quant_gemv_config

        def direct_config(T, K, epilogue=None, direct=False, wk=None):
            if direct and int(T) == 1 and (epilogue, int(K)) in direct_over:
                return direct_over[epilogue, int(K)]
            return plain_config(T, K, epilogue, direct, wk)
        cq.quant_gemv_config = direct_config
        roles = {"gate/up": ("pair", c.hidden_size), "down": ("res", c.ffn_size), "qkv": ("cat", c.hidden_size),
                 "o": ("res", qkv), "head": (None, c.hidden_size)}
        by_role("direct", "direct_best", roles, {n: DIRECT_CANDIDATES for n in roles}, direct_over)
        cq.quant_gemv_config = plain_config
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
    if a.splits:
        bound0, dec0 = ca.VARLEN_MAX_SPLITS, dict(ca.DECODE)
        for depth in LONG_DEPTHS:
            for bound in SPLIT_BOUNDS:
                ca.VARLEN_MAX_SPLITS = bound
                t = step_ms(depth)
                out["splits"].append(dict(depth=depth, max_splits=bound, **dec0, ms=t))
                print(f"depth {depth} max splits {bound}: {t:.4f} ms", flush=True)
        top = min((r for r in out["splits"] if r["depth"] == LONG_DEPTHS[-1]), key=lambda r: r["ms"])
        ca.VARLEN_MAX_SPLITS = top["max_splits"]
        for u, w in LONG_CANDIDATES:
            ca.DECODE.update(UNROLL=u, NWARPS=w)
            t = step_ms(LONG_DEPTHS[-1])
            out["splits"].append(dict(depth=LONG_DEPTHS[-1], max_splits=top["max_splits"], UNROLL=u, NWARPS=w, ms=t))
            print(f"depth {LONG_DEPTHS[-1]} max splits {top['max_splits']} unroll {u} warps {w}: {t:.4f} ms", flush=True)
        ca.VARLEN_MAX_SPLITS = bound0
        ca.DECODE.update(dec0)
    if a.json:
        a.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
