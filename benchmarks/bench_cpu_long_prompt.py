#!/usr/bin/env python3
"""Peak memory and time of one long prompt on the CPU (issue 13: under 1.3 GB at 4096 tokens):

    python benchmarks/bench_cpu_long_prompt.py [--tokens 4096] [-m MODEL.gguf]

A fresh process loads the model (default: SmolLM2-135M-Instruct Q4_1), prefills random token ids
and generates one token; prints the token, the seconds and the process's peak resident memory.
"""
import argparse
import resource
import time

import numpy as np


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("-m", "--model", default=None)
    a = ap.parse_args()
    import tffedu
    m = tffedu.load(a.model) if a.model else tffedu.load()
    ids = np.random.default_rng(0).integers(0, m.config.vocab_size, a.tokens).tolist()
    t0 = time.perf_counter()
    g = m.generate(ids, max_new_tokens=1, ignore_eos=True)
    dt = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20      # KiB -> GiB
    print(f"{a.tokens}-token prompt: next token {g.tokens[0]}, {dt:.1f} s, peak resident {peak:.2f} GiB")


if __name__ == "__main__":
    main()
