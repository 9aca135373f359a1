"""Model.generate: greedy vs HF, seeded sampling, filters, stops, errors — for chapter 08's
contiguous-cache loop (`tffedu.model.load`) and for the engine every user gets (`tffedu.load`)."""

import numpy as np
import pytest
import torch

import tffedu.engine
import tffedu.model
from tffedu.errors import SamplingError

from hf_models import SamplingLoop, tiny_qwen3, write_gguf

LOADERS = {"contiguous": lambda path: tffedu.model.load(path, cls=SamplingLoop), "engine": tffedu.engine.load}


@pytest.fixture(scope="module", params=list(LOADERS))
def pair(request, tmp_path_factory):
    hf = tiny_qwen3(hidden=64, heads=4, kv_heads=2, seed=11, std=0.08)
    path = write_gguf(hf, tmp_path_factory.mktemp("gen") / "m.gguf", "F32")
    return hf, LOADERS[request.param](path), path


def hf_next_logits(hf, ids):
    with torch.no_grad():
        return hf(torch.tensor([ids])).logits[0, -1].double().numpy()


def test_text_prompt_greedy_matches_hf(pair):
    hf, m, _ = pair
    prompt = "the cat sat on the mat"
    ids = m.tokenizer.encode(prompt, special=True)
    out = m.generate(prompt, max_new_tokens=10)
    with torch.no_grad():
        ref = hf.generate(torch.tensor([ids]), max_new_tokens=10, do_sample=False,
                          eos_token_id=sorted(m.eos_ids))[0, len(ids):].tolist()
    assert out.prompt_tokens == ids
    assert out.tokens == ref
    assert out.text == m.tokenizer.decode(out.tokens)
    assert out.stop_reason == ("eos" if ref[-1] in m.eos_ids else "length")


def test_seeded_sampling_is_reproducible(pair):
    _, m, _ = pair
    kw = dict(max_new_tokens=8, temperature=1.5, seed=7)
    a, b = m.generate([5, 6, 7], **kw), m.generate([5, 6, 7], **kw)
    assert a.tokens == b.tokens
    others = {tuple(m.generate([5, 6, 7], max_new_tokens=8, temperature=1.5, seed=s).tokens)
              for s in range(4)}
    assert len(others) > 1            # the seed matters


@pytest.mark.parametrize("kw", [dict(top_k=1), dict(min_p=1.0), dict(top_p=1e-6)])
def test_filters_that_leave_one_token_are_greedy(pair, kw):
    _, m, _ = pair
    greedy = m.generate([9, 8, 7], max_new_tokens=6).tokens
    assert m.generate([9, 8, 7], max_new_tokens=6, temperature=0.9, seed=3, **kw).tokens == greedy


def test_top_k_samples_follow_hf_probabilities(pair):
    "First sampled token over many seeds: only HF's top-k tokens, at softmax(top-k / T) rates."
    hf, m, _ = pair
    prompt, k, temp, n = [40, 41, 42], 4, 0.1, 300
    logits = hf_next_logits(hf, prompt) / temp
    top = np.argsort(logits)[::-1][:k]
    p = np.exp(logits[top] - logits[top].max())
    p /= p.sum()
    draws = [m.generate(prompt, max_new_tokens=1, temperature=temp, top_k=k, seed=s).tokens[0]
             for s in range(n)]
    assert set(draws) <= set(top.tolist())
    counts = np.array([draws.count(t) for t in top])
    expected = n * p
    chi2 = float((((counts - expected) ** 2) / np.maximum(expected, 1e-9))[expected > 5].sum())
    assert chi2 < 20.0, (counts, expected)          # df <= 3: p-value far below 0.001 past 20


def test_eos_stops_and_is_kept(pair):
    _, m, _ = pair
    greedy = m.generate([1, 2, 3], max_new_tokens=6).tokens
    eos = greedy[3]
    saved = m.eos_ids
    try:
        m.eos_ids = {eos}
        out = m.generate([1, 2, 3], max_new_tokens=6)
        full = m.generate([1, 2, 3], max_new_tokens=6, ignore_eos=True)
    finally:
        m.eos_ids = saved
    stop_at = greedy.index(eos)
    assert out.tokens == greedy[:stop_at + 1] and out.stop_reason == "eos"
    assert full.tokens == greedy and full.stop_reason == "length"


def test_stop_string(pair):
    _, m, _ = pair
    prompt = "one two three"
    greedy = m.generate(prompt, max_new_tokens=12)
    dec = m.tokenizer.decode
    # a stop string first completed by new token 5: its last character comes from that token
    first = next(i for i in range(4, 12) if dec(greedy.tokens[:i + 1]) != dec(greedy.tokens[:i]))
    stop = dec(greedy.tokens[:first + 1])[-2:]
    out = m.generate(prompt, max_new_tokens=12, stop=[stop, "\x00never"])
    want = next(i for i in range(12) if stop in dec(greedy.tokens[:i + 1]))
    assert out.tokens == greedy.tokens[:want + 1] and out.stop_reason == "stop"
    assert stop in out.text


def test_a_stop_the_last_token_completes_is_a_stop(pair):
    "max_new_tokens reached by the very token that completes a stop string: 'stop' (OpenAI's rule)."
    _, m, _ = pair
    prompt = "one two three"
    greedy = m.generate(prompt, max_new_tokens=12)
    dec = m.tokenizer.decode
    stop = dec(greedy.tokens[:6])[-2:]
    n = next(i for i in range(12) if stop in dec(greedy.tokens[:i + 1])) + 1    # where it is completed
    out = m.generate(prompt, max_new_tokens=n, stop=stop)
    assert out.tokens == greedy.tokens[:n] and out.stop_reason == "stop"


def test_callback_batch_and_zero_tokens(pair):
    _, m, _ = pair
    out = m.generate([3, 4], max_new_tokens=5)
    if hasattr(m, "generate_batch"):       # the engine
        batch = m.generate_batch([[3, 4], [5, 6, 7]], max_new_tokens=5)
        assert batch[0].tokens == out.tokens
        assert batch[1].tokens == m.generate([5, 6, 7], max_new_tokens=5).tokens
    else:                                  # chapter 08's loop reports every token to a callback
        seen = []
        assert m.generate([3, 4], max_new_tokens=5, callback=seen.append).tokens == seen == out.tokens
    empty = m.generate([3, 4], max_new_tokens=0)
    assert empty.tokens == [] and empty.text == ""


@pytest.mark.parametrize("kw,msg", [(dict(temperature=-1.0), "temperature"),
                                    (dict(top_p=0.0), "top_p"), (dict(top_k=-2), "top_k"),
                                    (dict(min_p=2.0), "min_p"), (dict(max_new_tokens=-1), "max_new_tokens"),
                                    (dict(stop=""), "stop"), (dict(seed=-5), "seed")])
def test_bad_parameters_are_named(pair, kw, msg):
    _, m, _ = pair
    with pytest.raises(SamplingError, match=msg):
        m.generate([1, 2], **kw)


def test_numpy_max_new_tokens_does_not_wrap_around(pair):
    """np.int64(2**63 - 1) new tokens is more than the context, refused before any work (the sum
    with the prompt's length, in int64, is negative). The engine's check: test_engine_threads.py."""
    from tffedu.errors import ContextOverflowError
    _, m, _ = pair
    if hasattr(m, "generate_batch"):
        pytest.skip("the engine: tested with its check, which fails fast")
    with pytest.raises(ContextOverflowError, match="max_new_tokens"):
        m.generate([1, 2], max_new_tokens=np.int64(2**63 - 1), callback=lambda t: pytest.fail("a token"))


@pytest.mark.parametrize("loader", list(LOADERS))
def test_weights_only_file_takes_ids_not_text(tmp_path, loader):
    from tffedu.errors import ModelError
    hf = tiny_qwen3(seed=12)
    m = LOADERS[loader](write_gguf(hf, tmp_path / "bare.gguf", tokenizer=False))
    assert m.tokenizer is None
    assert len(m.generate([1, 2, 3], max_new_tokens=3, ignore_eos=True).tokens) == 3
    with pytest.raises(ModelError, match="no tokenizer"):
        m.generate("hello", max_new_tokens=3)
    with pytest.raises(SamplingError, match="empty"):
        m.generate([], max_new_tokens=3)
