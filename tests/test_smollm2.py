"""SmolLM2-135M-Instruct (Q4_1 GGUF, llama architecture) against HF transformers float32.

HF loads the same GGUF (`from_pretrained(dir, gguf_file=...)`, dequantized to float32 by gguf-py,
Q/K rows un-permuted); along HF's own greedy continuation of a few prompts, our argmax must equal
HF's at >= 99 % of positions and the logits must agree within 1e-3 relative to the row maximum.
"""
import pathlib

import numpy as np
import pytest

from tffedu.assets import DEFAULT_MODEL, cache_dir

MODEL = cache_dir() / DEFAULT_MODEL
PROMPTS = ["The capital of France is",
           "<|im_start|>user\nWrite a haiku about the sea.<|im_end|>\n<|im_start|>assistant\n",
           "def fibonacci(n):"]
N_NEW = 20

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not MODEL.is_file(), reason=f"{MODEL} not downloaded "
                                 f"(python -c 'import tffedu.assets as a; a.default_model_path()')")]


@pytest.fixture(scope="module")
def hf():
    "(HF model, HF tokenizer) from the same GGUF file, float32 on the CPU."
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    torch.set_num_threads(2)
    kw = dict(gguf_file=MODEL.name)
    tok = AutoTokenizer.from_pretrained(str(MODEL.parent), **kw)
    model = AutoModelForCausalLM.from_pretrained(str(MODEL.parent), dtype=torch.float32, **kw)
    return model.eval(), tok


@pytest.fixture(scope="module")
def ours():
    import tffedu.model
    return tffedu.model.load(MODEL)


@pytest.fixture(scope="module")
def runs(hf):
    "For each prompt: (ids of prompt + HF's greedy continuation, HF's logits along them)."
    import torch
    model, tok = hf
    out = []
    with torch.no_grad():
        for p in PROMPTS:
            ids = tok(p, return_tensors="pt").input_ids
            seq = model.generate(ids, max_new_tokens=N_NEW, do_sample=False)
            logits = model(seq).logits[0].float().numpy()
            out.append((seq[0].tolist(), ids.shape[1], logits))
    return out


def test_config_is_smollm2(ours):
    c = ours.config
    assert (c.arch, c.n_layer, c.hidden_size, c.n_head, c.n_head_kv, c.vocab_size) == \
        ("llama", 30, 576, 9, 3, 49152)
    assert c.tied_embeddings and c.rope_type == "norm"


def test_logits_along_hf_greedy_path(ours, runs):
    agree = total = 0
    for seq, n_prompt, ref in runs:
        got = ours.logits(seq)
        assert got.shape == ref.shape
        err = np.abs(got - ref).max(axis=-1) / np.abs(ref).max(axis=-1)     # per position
        assert err.max() < 1e-3, f"worst position {err.argmax()}: {err.max():.2e}"
        top_ref = ref.max(-1)
        assert np.all(np.abs(got.max(-1) - top_ref) <= 1e-3 * np.abs(top_ref))
        agree += int((got.argmax(-1) == ref.argmax(-1)).sum())
        total += len(seq)
    assert agree / total >= 0.99, f"argmax agrees at {agree}/{total} positions"


def test_greedy_generation_follows_hf(ours, runs):
    "Our own greedy decode (KV cache path) reproduces HF's continuation (allowing near-ties)."
    for seq, n_prompt, ref in runs:
        out = ours.generate(seq[:n_prompt], max_new_tokens=N_NEW)
        hf_new = seq[n_prompt:]
        same = next((i for i, (a, b) in enumerate(zip(out.tokens, hf_new)) if a != b), None)
        if same is not None:     # a divergence is only acceptable at a near-tie of HF's logits
            row = np.sort(ref[n_prompt - 1 + same])[::-1]
            assert row[0] - row[1] < 1e-3 * abs(row[0]), f"diverged at new token {same}"
        else:
            assert out.tokens == hf_new[:len(out.tokens)]
