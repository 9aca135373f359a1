#!/usr/bin/env python3
"""The engine on the CPU (chapter 14): aggregate decode tokens/s by batch size, and the prompt
tokens prefix sharing saves on a shared-system-prompt workload.

    python benchmarks/bench_engine.py [--model PATH] [--threads 2] [-n 32] [--batches 1 4 16]

Decode tokens/s counts the tokens of all sequences over the decode steps (the batch's prefill and
graph building excluded). Not a test: it prints two tables.
"""
import argparse
import os
import time


def parse():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="GGUF file (default: SmolLM2-135M-Instruct Q4_1)")
    ap.add_argument("--threads", type=int, default=2, help="BLAS threads")
    ap.add_argument("-n", type=int, default=32, help="new tokens per sequence")
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 4, 16])
    ap.add_argument("--users", type=int, default=16, help="requests in the prefix-sharing workload")
    return ap.parse_args()


PROMPTS = ["The capital of France is", "def fibonacci(n):", "Once upon a time,",
           "The three primary colors are", "In 1969, the first", "A haiku about the sea:",
           "import numpy as np\n", "The best way to learn a language is"]
QUESTIONS = ["What is the capital of Italy?", "Name a prime number.", "What color is the sky?",
             "Who wrote Hamlet?", "How many legs does a spider have?", "What is 7 times 8?",
             "Which planet is the largest?", "What language is spoken in Brazil?"]


def main():
    a = parse()
    os.environ["OPENBLAS_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"] = str(a.threads)
    import tffedu
    from tffedu.engine import engine_of, measure_decode
    model = tffedu.load(a.model, n_ctx=2048)
    print(f"model: {a.model or 'SmolLM2-135M-Instruct Q4_1'}, {a.threads} BLAS threads, "
          f"{a.n} new tokens per sequence\n")
    print("batch | decode tokens/s (all sequences) | per sequence | vs batch 1")
    base = None
    for B in a.batches:
        rate = measure_decode(model, PROMPTS, B, a.n)
        base = base or rate
        print(f"{B:5d} | {rate:31.1f} | {rate / B:12.1f} | {rate / base:9.2f}x")

    system = ("You are a helpful assistant. Answer in one short sentence, be precise, and do not "
              "repeat the question. Prefer plain words over jargon. ") * 4
    chats = [model.tokenizer.apply_chat_template([{"role": "system", "content": system},
                                                  {"role": "user", "content": q}])
             for q in (QUESTIONS * (a.users // len(QUESTIONS) + 1))[:a.users]]
    print(f"\nshared system prompt ({len(model.tokenizer.encode(system))} tokens), {a.users} requests, "
          f"4 new tokens each, batches of 4:")
    print("prefix caching | prompt tokens computed | taken from cache | time (s)")
    for caching in (False, True):
        eng = engine_of(model, prefix_caching=caching, max_batch=4)
        t0 = time.perf_counter()
        for i in range(0, len(chats), 4):
            model.generate_batch(chats[i:i + 4], max_new_tokens=4)
        st = eng.stats
        print(f"{'on' if caching else 'off':>14} | {st['prefill_tokens']:22d} | "
              f"{st['cached_tokens']:16d} | {time.perf_counter() - t0:8.2f}")


if __name__ == "__main__":
    main()
