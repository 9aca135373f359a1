#!/usr/bin/env python3
"""Where one prefill step goes, on the GPU (issue 13):

    python benchmarks/profile_prefill.py MODEL.gguf [--tokens 512] [--json out.json]

1. the wall time of the engine's prefill step (one fresh prompt of --tokens random ids, as
   `tffedu bench`'s pp test takes it) against the GPU time of the replayed captured step: the
   difference is the host's share;
2. every op of the step timed alone (runner.op_timeline) with the floating-point work it must do
   (2 T N K for a matmul, 2 T² H D for causal attention) as TFLOP/s; a table by op kind and one of
   the first layer's ops.
"""
import argparse
import json
import pathlib
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def op_flops(node) -> float:
    "The multiply-adds (x2) an op of a prefill step must do: matmuls and attention; 0 for the rest."
    if node.op.startswith("matmul"):
        x, ws = node.inputs[0], [w for w in node.inputs if w.kind == "weight"]
        T = int(np.prod(x.shape[:-1]))
        return 2.0 * T * sum(w.shape[0] * w.shape[1] for w in ws)
    if node.op.startswith("paged_attention"):
        q = node.inputs[0]                                      # [T, Hq, D]
        T, H, D = q.shape
        return 2.0 * T * T * H * D                              # QK^T and PV, half the square (causal)
    return 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", type=pathlib.Path)
    ap.add_argument("--tokens", type=int, default=512, help="prompt tokens of the step")
    ap.add_argument("--json", type=pathlib.Path)
    a = ap.parse_args()

    import tffedu
    from tffedu.engine import Engine
    from tffedu.ops.cuda import time_all
    from tffedu.runner import op_timeline, op_totals

    P = a.tokens
    model = tffedu.load(a.model, device="cuda", n_ctx=max(4096, P + 16))
    eng = Engine(model, max_batch=1, prefix_caching=False, token_budget=P)   # the prompt in one step
    rng = np.random.default_rng(0)

    def prefill():                                              # seconds of one fresh prefill step
        req = eng.add(rng.integers(0, model.config.vocab_size, P).tolist(), max_new_tokens=1, ignore_eos=True)
        t0 = time.perf_counter()
        eng.step()
        dt = time.perf_counter() - t0
        eng.cancel(req)
        return dt

    prefill()                                                   # plans, compiles and captures the step
    wall_ms = 1e3 * float(np.median([prefill() for _ in range(5)]))
    runner = eng.runner
    ex, g = runner.last_captured("prefill")
    step_ms = float(np.median(time_all(g.replay, warmup=2, reps=10, stream=ex.stream)))
    rows = op_timeline(ex, repeat=5, reps=3)
    calls = {n.name: n for _, n, *_ in ex._calls}
    for r in rows:
        r["flops"] = op_flops(calls[r["name"]])
    total_us = sum(r["us"] for r in rows)
    print(f"{a.model.name} pp{P}: step {wall_ms:.2f} ms ({P / wall_ms * 1e3:.0f} tokens/s); replayed step "
          f"{step_ms:.2f} ms on the GPU ({len(rows)} ops); ops alone {total_us / 1e3:.2f} ms; "
          f"host share {wall_ms - step_ms:.2f} ms")
    by = op_totals(rows, "flops")
    print("| op | launches | ms | % of step | µs each | TFLOP/s |")
    print("|---|---|---|---|---|---|")
    for op, (n, us, fl) in sorted(by.items(), key=lambda kv: -kv[1][1]):
        print(f"| {op} | {n} | {us / 1e3:.3f} | {100 * us / total_us:.1f} | {us / n:.1f} | "
              f"{fl / (us * 1e-6) / 1e12:.0f} |" if fl else f"| {op} | {n} | {us / 1e3:.3f} | "
              f"{100 * us / total_us:.1f} | {us / n:.1f} | |")
    print("first layer:")
    for r in rows:
        if r["name"].startswith("blk.0.") or not r["name"].startswith("blk."):
            tf = f"{r['flops'] / (r['us'] * 1e-6) / 1e12:6.0f} TFLOP/s" if r["flops"] else ""
            print(f"  {r['name']:<24} {r['op']:<24} {r['us']:8.1f} µs {tf}")
    if a.json:
        a.json.write_text(json.dumps(dict(model=a.model.name, tokens=P, wall_ms=wall_ms, step_ms=step_ms,
                                          ops=rows), indent=1))


if __name__ == "__main__":
    main()
