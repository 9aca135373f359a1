#!/usr/bin/env python3
"""Where one decode step goes, on the GPU (issue 12's per-kernel table):

    python benchmarks/profile_decode.py MODEL.gguf [--depth 0] [--batch 1] [--json out.json]

1. tokens/s of the engine's decode loop (tg64) against the GPU time of the replayed step: the
   difference is the host's share of a token (Python, the feed copy, the read-back of the id);
2. every op of the step timed alone (runner.op_timeline), with the bytes it must move (its
   weights, its activations in and out, the K/V it reads) and that as a share of the card's
   copy bandwidth; a table by op kind and one of the first layer's ops.
"""
import argparse
import json
import pathlib
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", type=pathlib.Path)
    ap.add_argument("--depth", type=int, default=0, help="tokens of context before the step")
    ap.add_argument("--batch", type=int, default=1, help="sequences decoding together")
    ap.add_argument("--json", type=pathlib.Path)
    ap.add_argument("--cprofile", action="store_true", help="also where the host's share goes (cProfile, 64 steps)")
    a = ap.parse_args()

    import tffedu
    from tffedu.engine import Engine
    from tffedu.ops.cuda import copy_bandwidth, time_all
    from tffedu.runner import op_bytes, op_timeline, op_totals

    model = tffedu.load(a.model, device="cuda", n_ctx=max(4096, a.depth + 256))
    B = a.batch
    eng = Engine(model, max_batch=B, prefix_caching=False, token_budget=B * (a.depth + 1))   # one prefill step
    rng = np.random.default_rng(0)
    tps = []
    for _ in range(4):                                          # the first one warms up
        reqs = [eng.add(rng.integers(0, model.config.vocab_size, a.depth + 1).tolist(),
                        max_new_tokens=65, ignore_eos=True) for _ in range(B)]
        while not all(r.tokens for r in reqs):
            eng.step()                                          # prefill: the first tokens
        t0 = time.perf_counter()
        while not all(r.done for r in reqs):
            eng.step()
        tps.append(64 / (time.perf_counter() - t0))             # steps per second
    tg = dict(tps=float(np.mean(tps[1:])), std=float(np.std(tps[1:])))
    runner = eng.runner
    ex, g = runner.last_captured("decode")                     # the graph the last steps ran
    step_ms = float(np.median(time_all(g.replay, warmup=5, reps=30, stream=ex.stream)))
    bw = copy_bandwidth() * 1e9                                 # bytes/s, measured
    rows = op_timeline(ex)
    kv_tokens = B * (a.depth + 1)
    calls = {n.name: n for _, n, *_ in ex._calls}
    for r in rows:
        r["bytes"] = op_bytes(calls[r["name"]], runner.weights, kv_tokens)
        r["bw_pct"] = 100 * r["bytes"] / (r["us"] * 1e-6) / bw
    total_us = sum(r["us"] for r in rows)
    total_b = sum(r["bytes"] for r in rows)
    print(f"{a.model.name} batch {B}: tg64@d{a.depth} {tg['tps']:.1f} steps/s ({B * tg['tps']:.0f} t/s) = "
          f"{1e3 / tg['tps']:.3f} ms/step; "
          f"replayed step {step_ms:.3f} ms on the GPU ({len(rows)} ops, {g.n_nodes} graph nodes); "
          f"ops alone {total_us / 1e3:.3f} ms; host share {1e3 / tg['tps'] - step_ms:.3f} ms")
    print(f"bytes per step {total_b / 1e9:.3f} GB; copy bandwidth {bw / 1e12:.2f} TB/s -> bound "
          f"{total_b / bw * 1e3:.3f} ms ({total_b / bw * 1e3 / step_ms * 100:.0f}% of the replayed step)")
    by = op_totals(rows, "bytes")
    print(f"| op | launches | µs | % of step | GB | % of copy bw |")
    print("|---|---|---|---|---|---|")
    for op, (n, us, b) in sorted(by.items(), key=lambda kv: -kv[1][1]):
        print(f"| {op} | {n} | {us:.0f} | {100 * us / total_us:.1f} | {b / 1e9:.4f} | "
              f"{100 * b / (us * 1e-6) / bw:.0f} |")
    print("first layer:")
    for r in rows:
        if r["name"].startswith("blk.0.") or not r["name"].startswith("blk."):
            print(f"  {r['name']:<24} {r['op']:<24} {r['us']:7.1f} µs {r['bytes'] / 1e6:9.2f} MB "
                  f"{r['bw_pct']:5.0f}%")
    if a.cprofile:                                              # the host's share of a token
        import cProfile
        import pstats
        reqs = [eng.add(rng.integers(0, model.config.vocab_size, a.depth + 1).tolist(),
                        max_new_tokens=65, ignore_eos=True) for _ in range(B)]
        while not all(r.tokens for r in reqs):
            eng.step()
        prof = cProfile.Profile()
        prof.enable()
        while not all(r.done for r in reqs):
            eng.step()
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(18)
    if a.json:
        a.json.write_text(json.dumps(dict(model=a.model.name, depth=a.depth, batch=B, tg=tg, step_ms=step_ms,
                                          copy_bw=bw, ops=rows), indent=1))


if __name__ == "__main__":
    main()
