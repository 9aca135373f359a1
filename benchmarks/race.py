#!/usr/bin/env python3
"""The H200 race, tffedu against llama.cpp on the same files in one device call (see
race_llamacpp.sh, which runs this).

    python benchmarks/race.py tffedu MODEL.gguf OUT.json     # tffedu's rows for one model
    python benchmarks/race.py table OUT_DIR                  # merge with llama-bench's JSON

Rows of benchmarks/results/h200_vs_llamacpp.json: {"model", "test", "tffedu_tps", "llamacpp_tps",
"date"}; the same as a readable table on stdout, with the ratio and tffedu's eager decode.
"""
import datetime
import json
import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

REPS = int(os.environ.get("REPS", 3))
TESTS = [dict(p=512, n=128, depth=0, reps=REPS), dict(p=0, n=128, depth=2048, reps=REPS),
         dict(p=0, n=128, depth=0, reps=REPS, cuda_graphs=False)]


def run_tffedu(model_path: str, out: str) -> None:
    import tffedu
    from tffedu.cli import bench
    model = tffedu.load(model_path, device="cuda")
    rows = []
    for t in TESTS:
        for r in bench(model, **t):
            if not t.get("cuda_graphs", True):
                r["test"] += " eager"
            rows.append(r)
            print(r, flush=True)
    pathlib.Path(out).write_text(json.dumps(rows))


def llama_rows(path: pathlib.Path) -> dict:
    "test name -> avg tokens/s from llama-bench -o json."
    out = {}
    for r in json.loads(path.read_text()):
        if r.get("n_gen", 0) == 0:
            name = f"pp{r['n_prompt']}"
        else:
            name = f"tg{r['n_gen']}" + (f"@d{r['n_depth']}" if r.get("n_depth") else "")
        out[name] = float(r["avg_ts"])
    return out


def table(out_dir: str) -> None:
    d = pathlib.Path(out_dir)
    date = datetime.date.today().isoformat()
    rows, eager = [], {}
    print("| model | test | tffedu t/s | llama.cpp t/s | ratio |")
    print("| --- | --- | ---: | ---: | ---: |")
    for tf in sorted(d.glob("tf_*.json")):
        model = tf.stem[3:] + "-q8_0"
        lc = {}
        for f in sorted(d.glob(f"lc_{tf.stem[3:]}*.json")):
            lc.update(llama_rows(f))
        for r in json.loads(tf.read_text()):
            if r["test"].endswith(" eager"):
                eager[(model, r["test"])] = r["tps"]
                continue
            if r["test"] in lc:
                rows.append(dict(model=model, test=r["test"], tffedu_tps=round(r["tps"], 2),
                                 llamacpp_tps=round(lc[r["test"]], 2), date=date))
                print(f"| {model} | {r['test']} | {r['tps']:.1f} | {lc[r['test']]:.1f} | "
                      f"{r['tps'] / lc[r['test']]:.2f}x |")
    for (model, test), tps in eager.items():
        graph = next((x["tffedu_tps"] for x in rows if x["model"] == model and x["test"] == test.split()[0]), None)
        print(f"| {model} | {test} (no CUDA graphs) | {tps:.1f} | | "
              f"{'' if graph is None else f'graphs {graph / tps:.1f}x faster'} |")
    (d / "h200_vs_llamacpp.json").write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    if sys.argv[1] == "tffedu":
        run_tffedu(sys.argv[2], sys.argv[3])
    else:
        table(sys.argv[2])
