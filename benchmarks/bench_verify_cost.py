#!/usr/bin/env python3
"""The cost of a verify step (chapter 16): ms per engine step of one sequence carrying k = 0..K
draft tokens, and the acceptance rate at which drafting k tokens breaks even.

    python benchmarks/bench_verify_cost.py [--model PATH] [--device cpu|cuda] [--prompt 512]
                                           [-k 8] [--steps 20] [--json OUT.json] [--png OUT.png]

One request (a random prompt of --prompt tokens) decodes with a drafter that always proposes k
tokens; each step's wall time is taken around `Engine.step` (so it includes the host's share:
scheduling, the rollback of rejected drafts, reading the verdict back), the median of --steps steps.
k = 0 is plain decoding: its step is queued before the last one is read (the engine's overlap), as
plain generation runs. Break-even: the acceptance rate alpha at which a verify step's expected
tokens, (1 - alpha^(k+1)) / (1 - alpha), pay for its cost in decode steps.
"""
import argparse
import json
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from tffedu.speculative import Drafter, break_even  # noqa: E402


def parse():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="GGUF file or HF folder (default: SmolLM2-135M-Instruct)")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--prompt", type=int, default=512, help="prompt tokens (the depth the steps attend over)")
    ap.add_argument("-k", type=int, default=8, help="largest draft length")
    ap.add_argument("--steps", type=int, default=20, help="timed steps per k (the median is kept)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--png", default=None)
    return ap.parse_args()


class Always(Drafter):
    "A drafter that proposes k copies of one token: a step's cost does not depend on what is drafted."

    def propose(self, reqs):
        for r in reqs:
            r.drafts = [7] * r.k


def step_costs(model, prompt_tokens: int = 512, ks=range(9), steps: int = 20) -> list[dict]:
    """Rows {k, ms, cost, break_even_alpha}: the median wall time of `steps` engine steps of one
    sequence (a random prompt of `prompt_tokens`) drafting k tokens, against k = 0."""
    from tffedu.engine import Engine, drop_engine
    drop_engine(model)
    prompt = np.random.default_rng(0).integers(0, model.config.vocab_size, prompt_tokens).tolist()
    pages = (prompt_tokens + 20 * (steps + 4)) // 32 + 2
    rows = []
    for k in ks:
        eng = Engine(model, max_batch=1, num_pages=pages)
        eng.runner.verify_rows = None           # every k, past the rows the engine would draft for too
        req = eng.add(prompt, max_new_tokens=16 * (steps + 4) + 1, ignore_eos=True,
                      speculative=Always(k) if k else None)
        for _ in range(4):                      # the prefill, then steps that build (and capture) graphs
            eng.step()
        ts = []
        for _ in range(steps):
            if k:
                req.k = k
            t = time.perf_counter()
            eng.step()
            ts.append(time.perf_counter() - t)
        eng.cancel(req)
        eng.run()
        rows.append(dict(k=k, ms=1e3 * float(np.median(ts))))
        del eng
    for r in rows:
        r["cost"] = r["ms"] / rows[0]["ms"]
        r["break_even_alpha"] = break_even(r["cost"], r["k"]) if r["k"] else None
    return rows


def main():
    args = parse()
    import tffedu
    model = tffedu.load(args.model, device=args.device, n_ctx=args.prompt + 20 * (args.steps + 8))
    rows = step_costs(model, args.prompt, range(args.k + 1), args.steps)
    print(f"{'k':>3} {'ms/step':>8} {'x decode':>9} {'break-even alpha':>17}")
    for r in rows:
        be = "" if r["k"] == 0 else f"{r['break_even_alpha']:.3f}"
        print(f"{r['k']:3d} {r['ms']:8.2f} {r['cost']:9.2f} {be:>17}")
    meta = dict(model=os.path.basename(str(args.model)), device=args.device, prompt=args.prompt,
                steps=args.steps, date=time.strftime("%Y-%m-%d"))
    if args.json:
        json.dump(dict(meta=meta, rows=rows), open(args.json, "w"), indent=1)
    if args.png:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(1, 2, figsize=(9, 3.4))
        ks = [r["k"] for r in rows]
        ax[0].plot(ks, [r["ms"] for r in rows], "o-")
        ax[0].set(xlabel="draft tokens k", ylabel="ms per step", title="cost of a verify step")
        ax[1].plot(ks[1:], [r["break_even_alpha"] for r in rows[1:]], "o-")
        ax[1].set(xlabel="draft tokens k", ylabel="acceptance rate", ylim=(0, 1), title="break-even acceptance")
        fig.suptitle(f"{meta['model']} on {args.device}, {args.prompt}-token context")
        fig.tight_layout()
        fig.savefig(args.png, dpi=110)


if __name__ == "__main__":
    main()
