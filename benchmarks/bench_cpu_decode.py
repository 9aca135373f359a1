#!/usr/bin/env python3
"""SmolLM2-135M-Instruct decode speed on the CPU: tffedu (numpy) next to HF transformers (eager, float32).

    python benchmarks/bench_cpu_decode.py [--model PATH] [--threads 2] [-n 64] [--no-hf]

Both engines run in this process, greedy, on the same prompt and the same GGUF (HF dequantizes it to
float32 on load, as tffedu's CPU backend does), with the same number of BLAS/torch threads. Decode
tokens/s = (n - 1) / (time of n new tokens - time of the prompt and the first token). Not a test: it
prints a table (and whether both produced the same tokens).
"""
import argparse
import os
import sys
import time


def parse():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="GGUF file (default: SmolLM2-135M-Instruct Q4_1)")
    ap.add_argument("--threads", type=int, default=2, help="BLAS / torch threads for both engines")
    ap.add_argument("-n", type=int, default=64, help="new tokens per run")
    ap.add_argument("--reps", type=int, default=3, help="timed runs per engine (the best is kept)")
    ap.add_argument("--prompt", default="The capital of France is")
    ap.add_argument("--no-hf", action="store_true", help="only tffedu")
    return ap.parse_args()


def bench_tffedu(path, prompt, n, reps):
    import tffedu.model
    t = time.perf_counter()
    m = tffedu.model.load(path)
    load_s = time.perf_counter() - t
    ids = m.tokenizer.encode(prompt)
    m.generate(ids, max_new_tokens=4)                     # builds the graphs, warms the caches
    best = None
    for _ in range(reps):
        out = m.generate(ids, max_new_tokens=n, ignore_eos=True)   # always n tokens, like HF below
        tps = (n - 1) / out.decode_s
        if best is None or tps > best[0]:
            best = (tps, out.prefill_s, out.tokens)
    ex = m.executor(1)
    return dict(load_s=load_s, decode_tps=best[0], prefill_s=best[1], tokens=best[2], ids=ids,
                by_op=ex.time_by_op(), eos=m.eos_ids)


def bench_hf(path, ids, n, reps):
    import torch
    from transformers import AutoModelForCausalLM
    t = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path),
                                                 dtype=torch.float32, attn_implementation="eager")
    model.eval()
    load_s = time.perf_counter() - t
    x = torch.tensor([ids])

    def run(k):
        with torch.no_grad():
            t0 = time.perf_counter()
            out = model.generate(x, max_new_tokens=k, min_new_tokens=k, do_sample=False)
            return time.perf_counter() - t0, out[0, len(ids):].tolist()

    run(4)                                                # warm-up
    best = None
    for _ in range(reps):
        t1, _ = run(1)                                    # the prompt and the first token
        tn, toks = run(n)
        tps = (n - 1) / (tn - t1)
        if best is None or tps > best[0]:
            best = (tps, t1, toks)
    return dict(load_s=load_s, decode_tps=best[0], prefill_s=best[1], tokens=best[2])


def main():
    a = parse()
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(a.threads)                  # before numpy / torch load their BLAS
    import torch
    torch.set_num_threads(a.threads)
    if a.model is None:
        from tffedu.assets import default_model_path
        a.model = str(default_model_path())
    print(f"model {a.model}\nprompt {a.prompt!r}, {a.n} new tokens, {a.threads} thread(s), "
          f"best of {a.reps}", file=sys.stderr)
    ours = bench_tffedu(a.model, a.prompt, a.n, a.reps)
    rows = [("tffedu (numpy, f32 cache)", ours)]
    if not a.no_hf:
        rows.append(("HF transformers eager f32", bench_hf(a.model, ours["ids"], a.n, a.reps)))
    print(f"\n{'engine':28s} {'load s':>8s} {'prompt+1st s':>13s} {'decode tok/s':>13s}")
    for name, r in rows:
        print(f"{name:28s} {r['load_s']:8.2f} {r['prefill_s']:13.3f} {r['decode_tps']:13.2f}")
    if len(rows) == 2:
        hf = rows[1][1]
        same = next((i for i, (p, q) in enumerate(zip(ours["tokens"], hf["tokens"])) if p != q), None)
        if same is None:
            verdict = "identical"
        elif ours["tokens"][same] in ours["eos"]:   # HF's min_new_tokens forbids EOS; we ignore it
            verdict = f"identical up to the EOS at new token {same} (HF is kept from sampling EOS)"
        else:
            verdict = f"first differ at new token {same}"
        print(f"\nspeed-up {ours['decode_tps'] / hf['decode_tps']:.2f}x; greedy tokens {verdict}")
    print("\ntffedu decode step, time per op (ms/token):")
    for op, s in ours["by_op"].items():
        print(f"  {op:10s} {s * 1e3:8.2f}")


if __name__ == "__main__":
    main()
