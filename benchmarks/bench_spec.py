#!/usr/bin/env python3
"""Speculative decoding on input-grounded prompts: tokens/s of greedy generation with and without
drafts, on the same model and prompts, in one process.

    python benchmarks/bench_spec.py [--model PATH] [--device cpu|cuda] [-n 128] [--spec ngram]
                                    [--reps 3] [--json OUT.json]

The prompts are benchmarks/spec_prompts.json (rewriting, extracting, editing code: answers that copy
their input), each in the model's chat template. Every prompt runs plain and with `--spec` (each
run the best of --reps); the tokens must be the same (greedy). Prints a table per prompt and the
total: decode tokens/s (the tokens after the first / their time: the prefill is the same on both
sides), the draft tokens checked and accepted, and tokens per verify step. Not a test: the numbers
depend on the machine.
"""
import argparse
import json
import os
import platform
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def parse():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="GGUF file or HF folder (default: SmolLM2-135M-Instruct)")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("-n", type=int, default=256, help="new tokens at most per prompt")
    ap.add_argument("--spec", default="ngram", help='"ngram" or "draft:PATH"')
    ap.add_argument("--reps", type=int, default=3, help="runs per prompt and side (the fastest is kept)")
    ap.add_argument("--prompts", default=os.path.join(ROOT, "benchmarks", "spec_prompts.json"))
    ap.add_argument("--json", default=None, help="write the rows and the totals here")
    return ap.parse_args()


def timed(model, ids, n, reps, spec):
    "(decode seconds of the fastest run, its Generation, drafted, accepted, verify steps) of one prompt."
    from tffedu.engine import engine_of
    eng = engine_of(model)
    best = None
    for _ in range(reps):
        st0 = dict(eng.stats)
        g = model.generate(ids, max_new_tokens=n, speculative=spec)
        s = g.decode_s
        d = {k: eng.stats[k] - st0[k] for k in ("drafted", "accepted", "verify_steps")}
        if best is None or s < best[0]:
            best = (s, g, d)
    return best


def chat_ids(model, text: str) -> list[int]:
    "The prompt in the model's chat template, as token ids."
    return model.tokenizer.encode(model.tokenizer.apply_chat_template(
        [{"role": "user", "content": text}], add_generation_prompt=True), special=True)


def compare(model, prompts, n: int = 256, reps: int = 3, spec="ngram", out=print) -> tuple[list, dict]:
    """Every prompt plain and with `spec`: (rows, total), decode tokens/s of both, the drafts checked
    and kept, whether the tokens are the same; `out` gets the table line by line."""
    rows = []
    out(f"{'task':8} {'tokens':>6} {'plain t/s':>10} {'spec t/s':>9} {'ratio':>6} {'drafted':>8} "
        f"{'accepted':>9} {'tok/verify':>10}  same")
    for i, p in enumerate(prompts):
        ids = chat_ids(model, p["prompt"])
        warm = n if i == 0 else 4                  # graphs built (the first run: for every length), caches warm
        model.generate(ids, max_new_tokens=warm)
        model.generate(ids, max_new_tokens=warm, speculative=spec)
        s0, g0, _ = timed(model, ids, n, reps, None)
        s1, g1, d = timed(model, ids, n, reps, spec)
        k = len(g0.tokens) - 1                                      # after the first: decode tokens
        row = dict(task=p["task"], tokens=k, plain_s=s0, spec_s=s1, plain_tps=k / s0, spec_tps=k / s1,
                   drafted=d["drafted"], accepted=d["accepted"], verify_steps=d["verify_steps"],
                   same=g0.tokens == g1.tokens)
        rows.append(row)
        tpv = (d["accepted"] + d["verify_steps"]) / max(1, d["verify_steps"])
        out(f"{p['task']:8} {k:6d} {row['plain_tps']:10.1f} {row['spec_tps']:9.1f} "
            f"{row['spec_tps'] / row['plain_tps']:6.2f} {d['drafted']:8d} {d['accepted']:9d} {tpv:10.2f}  {row['same']}")
    tok = sum(r["tokens"] for r in rows)
    total = dict(tokens=tok, plain_tps=tok / sum(r["plain_s"] for r in rows),
                 spec_tps=tok / sum(r["spec_s"] for r in rows),
                 drafted=sum(r["drafted"] for r in rows), accepted=sum(r["accepted"] for r in rows),
                 verify_steps=sum(r["verify_steps"] for r in rows), same=all(r["same"] for r in rows))
    total["speedup"] = total["spec_tps"] / total["plain_tps"]
    total["acceptance"] = total["accepted"] / max(1, total["drafted"])
    out(f"{'all':8} {tok:6d} {total['plain_tps']:10.1f} {total['spec_tps']:9.1f} {total['speedup']:6.2f} "
        f"{total['drafted']:8d} {total['accepted']:9d}  acceptance {total['acceptance']:.2f}  same {total['same']}")
    return rows, total


def main():
    args = parse()
    import tffedu
    model = tffedu.load(args.model, device=args.device)
    rows, total = compare(model, json.load(open(args.prompts)), args.n, args.reps, args.spec)
    if args.json:
        path = getattr(model.source, "path", None)
        meta = dict(model=os.path.basename(str(path or args.model)), device=args.device, spec=args.spec,
                    n=args.n, reps=args.reps, date=time.strftime("%Y-%m-%d"), machine=platform.machine(),
                    cpus=os.cpu_count())
        json.dump(dict(meta=meta, rows=rows, total=total), open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
