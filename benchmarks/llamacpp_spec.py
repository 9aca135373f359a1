#!/usr/bin/env python3
"""llama-server's decode speed on the speculative-decoding prompt set (benchmarks/spec_prompts.json):
one chat request at a time, greedy, `-n` new tokens at most, each --reps times (the fastest kept).

    python benchmarks/llamacpp_spec.py --url http://127.0.0.1:8090 [-n 256] [--reps 3] [--json OUT]

Reads llama-server's own `timings` of each answer: predicted_n, predicted_per_second (decode
tokens/s) and, when it speculates, draft_n and draft_n_accepted. Only the standard library.
"""
import argparse
import json
import os
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def ask(url: str, prompt: str, n: int) -> dict:
    body = json.dumps({"messages": [{"role": "user", "content": prompt}], "max_tokens": n,
                       "temperature": 0, "cache_prompt": False}).encode()
    req = urllib.request.Request(url + "/v1/chat/completions", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())["timings"]


def wait_healthy(url: str, seconds: float = 300) -> None:
    t0 = time.time()
    while time.time() - t0 < seconds:
        try:
            with urllib.request.urlopen(url + "/health", timeout=5) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(1)
    raise SystemExit(f"llama-server at {url} did not become healthy in {seconds} s")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("-n", type=int, default=256)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--prompts", default=os.path.join(ROOT, "benchmarks", "spec_prompts.json"))
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    wait_healthy(args.url)
    rows = []
    for p in json.load(open(args.prompts)):
        ask(args.url, p["prompt"], 4)                                    # warm
        best = max((ask(args.url, p["prompt"], args.n) for _ in range(args.reps)),
                   key=lambda t: t["predicted_per_second"])
        rows.append(dict(task=p["task"], tokens=best["predicted_n"], tps=best["predicted_per_second"],
                         drafted=best.get("draft_n", 0), accepted=best.get("draft_n_accepted", 0)))
        print(f"{p['task']:8} {rows[-1]['tokens']:5d} {rows[-1]['tps']:9.1f} t/s  drafted {rows[-1]['drafted']:5d} "
              f"accepted {rows[-1]['accepted']:5d}", flush=True)
    tok = sum(r["tokens"] for r in rows)
    total = dict(tokens=tok, tps=tok / sum(r["tokens"] / r["tps"] for r in rows),
                 drafted=sum(r["drafted"] for r in rows), accepted=sum(r["accepted"] for r in rows))
    print(f"{'all':8} {tok:5d} {total['tps']:9.1f} t/s  drafted {total['drafted']:5d} accepted {total['accepted']:5d}")
    if args.json:
        json.dump(dict(rows=rows, total=total), open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
