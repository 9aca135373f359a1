#!/usr/bin/env python3
"""The race, tffedu against llama.cpp on the same GPU and the same files (race_llamacpp.sh runs
this).

    python benchmarks/race.py tffedu MODEL.gguf OUT.json                   # tffedu's rows for one model
    python benchmarks/race.py tffedu MODEL.gguf OUT.json --batch 1,4,8,16  # + pp2048, batch1..batch16
    python benchmarks/race.py tffedu MODEL.gguf OUT.json --long            # the long-context rows alone
    python benchmarks/race.py table OUT_DIR                                # merge with llama.cpp's output

tffedu's rows: pp512, tg128, tg128@d2048 and tg128 eager (no CUDA graphs) through tffedu.cli.bench;
with --batch also pp2048 (bench with p=2048, n=0) and `batch{B}`: the aggregate decode tokens/s of
B sequences of 128 random prompt tokens and 128 new tokens each (tffedu.engine.measure_decode, pure
decode steps). --long: only the long-context rows (issue 35), the model loaded with room for them:
pp16384, pp32768, tg128@d8192, tg32@d16384, tg32@d32768, then tg32@d16384 and tg32@d32768 over 8-bit
K/V pages (the model loaded with kv_dtype="Q8_0"), named "... kv q8_0" as the table names llama-bench's
-ctk q8_0 -ctv q8_0 rows. OUT.json is rewritten after every row, so a run killed by its timeout keeps the rows
it finished.

OUT_DIR holds tf_{model}.json and tf_{model}_long.json (these rows), lc_{model}*.json (llama-bench
-o json: pp{p}, tg{n}, tg{n}@d{depth}, and " kv TYPE" after a test of a quantized K/V cache) and
lc_{model}_batched.jsonl (llama-batched-bench --output-format jsonl, one line per npl; its markdown
table is read too): `batch{B}` = S_TG t/s ("speed_tg") at npl = B.

`table` writes OUT_DIR/vs_llamacpp.json, rows as in benchmarks/results/h200_vs_llamacpp.json:
{"model", "test", "tffedu_tps", "llamacpp_tps", "date"}, for every test both sides ran; prints the
same as a readable table with the ratio and tffedu's eager decode; and writes
OUT_DIR/batch_sweep.json, the raw batch sweep: {"model", "batch", "tffedu_tps", "llamacpp_tps",
"tffedu_ms_per_step", "llamacpp_ms_per_step", "date"} per B (ms per step = B / tps * 1000; null
where a side has no number).
"""
import datetime
import gc
import json
import os
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

REPS = int(os.environ.get("REPS", 3))
TESTS = [dict(p=512, n=128, depth=0, reps=REPS), dict(p=0, n=128, depth=2048, reps=REPS),
         dict(p=0, n=128, depth=0, reps=REPS, cuda_graphs=False)]
LONG_TESTS = [dict(p=16384, n=0, reps=REPS), dict(p=32768, n=0, reps=REPS), dict(p=0, n=128, depth=8192, reps=REPS),
              dict(p=0, n=32, depth=16384, reps=REPS), dict(p=0, n=32, depth=32768, reps=REPS)]
LONG_KV8_TESTS = [t for t in LONG_TESTS if t.get("depth", 0) >= 16384]   # the long decode rows, over Q8_0 pages
LONG_CTX = 32768 + 256                  # the deepest test's context and its new tokens
BATCH_PROMPT, BATCH_NEW = 128, 128      # llama-batched-bench -npp 128 -ntg 128


def tffedu_rows(model, batch_sizes=(), emit=print, long=False):
    """Run the tests on a loaded model; `emit(row)` after each. With batch sizes, also pp2048 and
    the batch{B} decode sweep, smallest B first; long: LONG_TESTS instead of all of those
    (LONG_KV8_TESTS over a model with Q8_0 pages)."""
    import numpy as np
    from tffedu import cli, engine
    kv8 = getattr(model, "kv_dtype", None) == "Q8_0"
    tests = (LONG_KV8_TESTS if kv8 else LONG_TESTS) if long else TESTS + ([dict(p=2048, n=0, reps=REPS)] if batch_sizes else [])
    for t in tests:
        for r in cli.bench(model, **t):
            if not t.get("cuda_graphs", True):
                r["test"] += " eager"
            if kv8:
                r["test"] += " kv q8_0"
            emit(r)
        gc.collect()              # an Engine's pages are freed with it (runner <-> executor cycles)
    if long:
        return
    rng = np.random.default_rng(0)
    V = model.config.vocab_size
    prompts = [rng.integers(0, V, BATCH_PROMPT).tolist() for _ in range(max(batch_sizes, default=0))]
    for B in batch_sizes:
        tps = float(engine.measure_decode(model, prompts[:B], B, BATCH_NEW))
        emit(dict(test=f"batch{B}", tps=tps, batch=B, ms_per_step=B / tps * 1000,
                  prompt=BATCH_PROMPT, new_tokens=BATCH_NEW))
        gc.collect()
    if batch_sizes:
        emit(generate_batch_row(model, prompts))


def generate_batch_row(model, prompts) -> dict:
    """The public call on the same prompts: `model.generate_batch`, its engine sized by default.
    tps: the decode tokens (all but each first) over the time from the first first token to the
    last token, as measure_decode counts; e2e_tps: every new token over the call's wall time."""
    import time
    for _ in range(2):                  # the first call plans and captures the graphs
        t0 = time.perf_counter()
        outs = model.generate_batch(prompts, BATCH_NEW, ignore_eos=True)
        wall = time.perf_counter() - t0
    span = max(g.prefill_s + g.decode_s for g in outs) - min(g.prefill_s for g in outs)
    return dict(test=f"generate_batch{len(prompts)}", tps=sum(len(g.tokens) - 1 for g in outs) / span,
                e2e_tps=sum(len(g.tokens) for g in outs) / wall, batch=len(prompts),
                prompt=BATCH_PROMPT, new_tokens=BATCH_NEW)


def run_tffedu(model_path: str, out: str, batch_sizes=(), long=False) -> None:
    import tffedu
    from tffedu.runner import device_weights
    model = tffedu.load(model_path, device="cuda", **({"n_ctx": LONG_CTX} if long else {}))
    on_gpu = sum(t.nbytes for t in device_weights(model).values())
    in_file = sum(t.nbytes for t in model.weights.values())
    print(f"weights: {on_gpu / 2**30:.2f} GiB on the GPU for {in_file / 2**30:.2f} GiB of file tensors "
          f"({on_gpu / in_file:.3f}x)", flush=True)
    out, rows = pathlib.Path(out), []

    def emit(r):
        rows.append(r)
        print(r, flush=True)
        tmp = out.with_suffix(".tmp")
        tmp.write_text(json.dumps(rows))
        tmp.replace(out)          # whole rows only, even if the run is killed mid-write

    tffedu_rows(model, batch_sizes, emit, long)
    if long:                      # the decode rows again over 8-bit pages (the F16 model's pages freed first)
        del model
        gc.collect()
        tffedu_rows(tffedu.load(model_path, device="cuda", n_ctx=LONG_CTX, kv_dtype="Q8_0"), (), emit, long)


def _json_objects(text: str) -> list:
    "The objects of a JSON array, or as many whole ones as a cut-off array holds."
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    dec, objs = json.JSONDecoder(), []
    for m in re.finditer(r"^\s*\{", text, re.M):
        try:
            objs.append(dec.raw_decode(text, m.end() - 1)[0])
        except json.JSONDecodeError:
            pass
    return [o for o in objs if isinstance(o, dict) and "avg_ts" in o]


def llama_rows(path: pathlib.Path) -> dict:
    "test name -> avg tokens/s from llama-bench -o json."
    out = {}
    for r in _json_objects(path.read_text()):
        if r.get("n_gen", 0) == 0:
            name = f"pp{r['n_prompt']}"
        else:
            name = f"tg{r['n_gen']}" + (f"@d{r['n_depth']}" if r.get("n_depth") else "")
        if r.get("type_k", "f16") != "f16":
            name += f" kv {r['type_k']}"
        out[name] = float(r["avg_ts"])
    return out


_MD_ROW = re.compile(r"^\|\s*\d+\s*\|")   # |    128 |    128 |    1 |    256 | ... (the table's rows)


def llama_batched_rows(path: pathlib.Path) -> dict:
    """`batch{B}` -> aggregate decode tokens/s (S_TG) from llama-batched-bench's stdout: jsonl
    (--output-format jsonl: {"pp", "tg", "pl", ..., "speed_pp", "speed_tg", ...} per line) or its
    markdown table (| PP | TG | B | N_KV | T_PP s | S_PP t/s | T_TG s | S_TG t/s | T s | S t/s |)."""
    out = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(r, dict) and "pl" in r and "speed_tg" in r:
                out[f"batch{int(r['pl'])}"] = float(r["speed_tg"])
        elif _MD_ROW.match(line):
            cells = [c.strip() for c in line.strip("|").split("|")]
            if len(cells) == 10:
                out[f"batch{int(cells[2])}"] = float(cells[7])
    return out


def _load_rows(path: pathlib.Path) -> list:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        print(f"race.py: {path.name} unreadable ({e}): skipped", file=sys.stderr)
        return []


def table(out_dir: str) -> None:
    d = pathlib.Path(out_dir)
    date = datetime.date.today().isoformat()
    rows, eager, sweep, gen = [], {}, [], []
    print("| model | test | tffedu t/s | llama.cpp t/s | ratio |")
    print("| --- | --- | ---: | ---: | ---: |")
    for tf in sorted(d.glob("tf_*.json")):
        long = tf.stem.endswith("_long")                          # --long's rows: no batch sweep
        name = tf.stem[3:].removesuffix("_long")
        model = name if "-q" in name else name + "-q8_0"   # NAME-TYPE: requantized (llamacpp.sh's race_model)
        lc = {}
        for f in [d / f"lc_{name}.json", *sorted(d.glob(f"lc_{name}_d*.json"))]:
            lc.update(llama_rows(f))
        batched = d / f"lc_{name}_batched.jsonl"
        lcb = llama_batched_rows(batched) if batched.exists() and not long else {}
        lc.update(lcb)
        tf_batch = {}
        for r in _load_rows(tf):
            if r["test"].startswith("generate_batch"):
                gen.append((model, r))
                continue
            if r["test"].endswith(" eager"):
                eager[(model, r["test"])] = r["tps"]
                continue
            if r["test"].startswith("batch"):
                tf_batch[r["test"]] = r["tps"]
            if r["test"] in lc:
                rows.append(dict(model=model, test=r["test"], tffedu_tps=round(r["tps"], 2),
                                 llamacpp_tps=round(lc[r["test"]], 2), date=date))
                print(f"| {model} | {r['test']} | {r['tps']:.1f} | {lc[r['test']]:.1f} | "
                      f"{r['tps'] / lc[r['test']]:.2f}x |")
        for test in sorted(set(tf_batch) | set(lcb), key=lambda t: int(t[5:])):
            B, a, b = int(test[5:]), tf_batch.get(test), lcb.get(test)
            sweep.append(dict(model=model, batch=B,
                              tffedu_tps=None if a is None else round(a, 2),
                              llamacpp_tps=None if b is None else round(b, 2),
                              tffedu_ms_per_step=None if not a else round(B / a * 1000, 3),
                              llamacpp_ms_per_step=None if not b else round(B / b * 1000, 3),
                              date=date))
    for (model, test), tps in eager.items():
        graph = next((x["tffedu_tps"] for x in rows if x["model"] == model and x["test"] == test.split()[0]), None)
        print(f"| {model} | {test} (no CUDA graphs) | {tps:.1f} | | "
              f"{'' if graph is None else f'graphs {graph / tps:.1f}x faster'} |")
    for model, r in gen:               # the public call against the engine measured alone
        alone = next((s["tffedu_tps"] for s in sweep if s["model"] == model and s["batch"] == r["batch"]), None)
        vs = f"{r['tps'] / alone:.2f}x batch{r['batch']}" if alone else ""
        print(f"| {model} | {r['test']} (decode; {r['e2e_tps']:.0f} t/s end to end) | {r['tps']:.1f} | | {vs} |")
    if sweep:
        print("\n| model | batch | tffedu ms/step | llama.cpp ms/step |\n| --- | ---: | ---: | ---: |")
        for s in sweep:
            print(f"| {s['model']} | {s['batch']} | {s['tffedu_ms_per_step'] or ''} | "
                  f"{s['llamacpp_ms_per_step'] or ''} |")
    (d / "vs_llamacpp.json").write_text(json.dumps(rows, indent=1) + "\n")
    (d / "batch_sweep.json").write_text(json.dumps(sweep, indent=1) + "\n")


def main(argv):
    if len(argv) >= 3 and argv[0] == "tffedu":
        sizes, long = (), argv[3:] == ["--long"]
        if len(argv) == 5 and argv[3] == "--batch":
            sizes = tuple(int(b) for b in argv[4].split(",") if b.strip())
        elif len(argv) != 3 and not long:
            sys.exit(__doc__)
        run_tffedu(argv[1], argv[2], sizes, long)
    elif len(argv) == 2 and argv[0] == "table":
        table(argv[1])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
