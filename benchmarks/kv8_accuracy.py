#!/usr/bin/env python3
"""What an 8-bit K/V cache costs in accuracy: teacher-forced logits of a text with the pages in Q8_0 and
in F16, each against the F32 cache (the CPU's default), on any model tffedu loads.

    python benchmarks/kv8_accuracy.py [MODEL] [--text FILE] [--tokens 1024]

MODEL defaults to SmolLM2-135M-Instruct (the real model the tests use); the text to the README. Prints,
per cache type, the relative max error of the logits and the share of positions whose top-1 token is
the F32 cache's (issue 35 reports these).
"""
import argparse
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", nargs="?", type=pathlib.Path, help="a GGUF file or HF folder (default: SmolLM2)")
    ap.add_argument("--text", type=pathlib.Path, default=ROOT / "README.md")
    ap.add_argument("--tokens", type=int, default=1024)
    a = ap.parse_args()
    import numpy as np
    import tffedu
    if a.tokens < 1:
        raise SystemExit("--tokens must be at least 1")
    ref = tffedu.load(a.model, n_ctx=a.tokens + 1, kv_dtype="F32")
    ids = ref.tokenizer.encode(a.text.read_text())[:a.tokens]
    want = ref.logits(ids)
    print(f"{ref.config.arch}, {len(ids)} tokens of {a.text.name}, against the F32 cache:")
    for kv in ("F16", "Q8_0"):
        got = tffedu.load(a.model, n_ctx=a.tokens + 1, kv_dtype=kv).logits(ids)
        err = np.abs(got - want).max() / np.abs(want).max()
        top1 = (got.argmax(-1) == want.argmax(-1)).mean()
        print(f"  {kv:5s} pages: logits rel err {err:.2e}, top-1 agreement {100 * top1:.2f} %")


if __name__ == "__main__":
    main()
