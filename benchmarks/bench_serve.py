"""A load generator for OpenAI-compatible servers (`tffedu serve`, llama-server, vLLM, SGLang).

Streams POST /v1/completions requests and times every chunk as it arrives:

* TTFT (time to first token): from sending the request to its first text chunk;
* ITL (inter-token latency): between two chunks of one response;
* end-to-end latency, and output tokens/s over the whole run (from each response's `usage`).

Two ways to load the server: a fixed number of clients, each sending its next request as soon as
the last one ends (`--concurrency 1 8 32 64`), or requests arriving at random (a Poisson process,
`--rate 4 --requests 200`) whatever the server's pace. Results: a table on stdout, JSON
(`--json`), and a picture of latency against throughput (`--plot`).

    python benchmarks/bench_serve.py --url http://127.0.0.1:8000 --concurrency 1 8 32 \\
        --prompt-tokens 128 --max-tokens 128 --label tffedu --json out.json --plot out.png
"""
import argparse
import asyncio
import json
import sys
import time

import numpy as np

WORDS = ("time person year way day thing man world life hand part child eye woman place work week "
         "case point number group problem fact river stone light music paper water garden").split()


def make_prompts(n: int, n_words: int, seed: int = 0) -> list[str]:
    "n different prompts of n_words random words (about a token each, for the usual vocabularies)."
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, n_words)) for _ in range(n)]


async def one_request(client, url: str, prompt, max_tokens: int, extra: dict) -> dict:
    """Stream one completion; the times its chunks arrived (seconds after sending) and its usage,
    or {"error": ...} (a refusal, a broken connection: the load goes on)."""
    import httpx
    body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}, **extra}
    t0, times, usage = time.perf_counter(), [], None
    try:
        async with client.stream("POST", url + "/v1/completions", json=body) as r:
            if r.status_code != 200:
                return {"error": f"{r.status_code}: {(await r.aread())[:200]!r}"}
            async for line in r.aiter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line[6:])
                if chunk.get("usage"):
                    usage = chunk["usage"]
                if any(c.get("text") for c in chunk.get("choices", [])):
                    times.append(time.perf_counter() - t0)
    except httpx.HTTPError as e:                   # counted as a failed request
        return {"error": f"{type(e).__name__}: {e}"}
    if not times:
        return {"error": "no text came back"}
    n = usage["completion_tokens"] if usage else len(times)
    return {"ttft": times[0], "itl": np.diff(times).tolist(), "e2e": time.perf_counter() - t0, "tokens": n}


async def run_clients(url, prompts, concurrency: int, n_requests: int, max_tokens: int, extra: dict):
    "`concurrency` clients, each sending its next request when the last one ends; (results, seconds)."
    import httpx
    todo = iter(range(n_requests))

    async def client_loop(client):
        out = []
        for i in todo:
            out.append(await one_request(client, url, prompts[i % len(prompts)], max_tokens, extra))
        return out

    # a connection per request: a server closes kept-alive connections on its own (llama-server's
    # cpp-httplib after 5 s idle or 100 requests), and a request sent on one as it closes fails
    limits = httpx.Limits(max_connections=concurrency + 4, max_keepalive_connections=0)
    async with httpx.AsyncClient(timeout=600, limits=limits) as client:
        t0 = time.perf_counter()
        done = await asyncio.gather(*(client_loop(client) for _ in range(concurrency)))
        return [r for rs in done for r in rs], time.perf_counter() - t0


async def run_rate(url, prompts, rate: float, n_requests: int, max_tokens: int, extra: dict, seed: int = 0):
    "Requests arriving as a Poisson process of `rate` per second; (results, seconds)."
    import httpx
    gaps = np.random.default_rng(seed).exponential(1 / rate, n_requests)
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=0)   # as in run_clients
    async with httpx.AsyncClient(timeout=600, limits=limits) as client:
        t0, tasks = time.perf_counter(), []
        for i, gap in enumerate(gaps):
            await asyncio.sleep(gap)
            tasks.append(asyncio.create_task(one_request(client, url, prompts[i % len(prompts)], max_tokens, extra)))
        results = await asyncio.gather(*tasks)
        return results, time.perf_counter() - t0


def summarize(results: list[dict], seconds: float) -> dict:
    "p50/p99 of TTFT, ITL and end-to-end latency (ms), and output tokens/s over the run."
    ok = [r for r in results if "error" not in r]
    pct = lambda xs, q: float(np.percentile(xs, q) * 1e3) if len(xs) else float("nan")  # noqa: E731
    itl = [x for r in ok for x in r["itl"]]
    row = {"requests": len(results), "errors": len(results) - len(ok), "seconds": round(seconds, 3),
           "output_tokens_per_s": sum(r["tokens"] for r in ok) / seconds}
    for name, xs in (("ttft", [r["ttft"] for r in ok]), ("itl", itl), ("e2e", [r["e2e"] for r in ok])):
        row[f"{name}_p50_ms"], row[f"{name}_p99_ms"] = pct(xs, 50), pct(xs, 99)
    if row["errors"]:
        row["first_error"] = next(r["error"] for r in results if "error" in r)
    return row


def plot(rows: list[dict], path: str) -> None:
    "Latency (TTFT and ITL p50) against output tokens/s, a line per label, points labelled by load."
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for label in dict.fromkeys(r["label"] for r in rows):
        mine = [r for r in rows if r["label"] == label]
        for ax, key in zip(axes, ("ttft_p50_ms", "itl_p50_ms")):
            ax.plot([r["output_tokens_per_s"] for r in mine], [r[key] for r in mine], "o-", label=label)
            for r in mine:
                ax.annotate(r["load"], (r["output_tokens_per_s"], r[key]), fontsize=8,
                            textcoords="offset points", xytext=(4, 4))
    for ax, title in zip(axes, ("time to first token, p50 (ms)", "inter-token latency, p50 (ms)")):
        ax.set(xlabel="output tokens/s (all requests)", ylabel="ms", title=title)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--url", default="http://127.0.0.1:8000")
    p.add_argument("--label", default="server", help="the name of this server in the results")
    p.add_argument("--concurrency", type=int, nargs="*", default=[1, 8, 32, 64])
    p.add_argument("--rate", type=float, nargs="*", default=[], help="Poisson arrivals per second")
    p.add_argument("--requests", type=int, default=0, help="requests per load (default: 4 x concurrency, >= 8)")
    p.add_argument("--prompt-tokens", type=int, default=128, help="words per prompt (about a token each)")
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--ignore-eos", action="store_true", help="every request generates max-tokens tokens")
    p.add_argument("--json", help="append the rows to this JSON file (a list)")
    p.add_argument("--plot", help="write the latency/throughput picture of the JSON file's rows here")
    a = p.parse_args(argv)
    extra = {"ignore_eos": True} if a.ignore_eos else {}
    prompts = make_prompts(256, a.prompt_tokens)
    rows = []
    loads = [("c", c) for c in a.concurrency] + [("r", r) for r in a.rate]
    # before measuring, as many short requests at once as the widest load sends: a server that plans
    # (and captures) a graph per batch size does so outside the timings
    widest = max([int(c) for c in a.concurrency] + [1])
    asyncio.run(run_clients(a.url, prompts, widest, widest, 8, extra))
    for kind, x in loads:
        n = a.requests or max(8, 4 * int(x))
        coro = (run_clients(a.url, prompts, int(x), n, a.max_tokens, extra) if kind == "c"
                else run_rate(a.url, prompts, x, n, a.max_tokens, extra))
        results, seconds = asyncio.run(coro)
        row = {"label": a.label, "load": f"{'concurrency' if kind == 'c' else 'rate'} {x:g}",
               "prompt_words": a.prompt_tokens, "max_tokens": a.max_tokens, **summarize(results, seconds)}
        rows.append(row)
        print(f"{a.label:10s} {row['load']:16s} {row['output_tokens_per_s']:9.1f} tok/s  TTFT p50 "
              f"{row['ttft_p50_ms']:8.1f} ms p99 {row['ttft_p99_ms']:8.1f}  ITL p50 {row['itl_p50_ms']:7.2f} ms "
              f"p99 {row['itl_p99_ms']:7.2f}  errors {row['errors']}", flush=True)
    if a.json:
        try:
            with open(a.json) as f:
                old = json.load(f)
        except FileNotFoundError:
            old = []
        with open(a.json, "w") as f:
            json.dump(old + rows, f, indent=1)
        if a.plot:
            with open(a.json) as f:
                plot(json.load(f), a.plot)
    elif a.plot:
        plot(rows, a.plot)
    return 1 if any(r["errors"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
