"""The engine (chapter 14): paged == contiguous logits, generate_batch == generate one at a time
(greedy and seeded sampling, any finishing order, prefix caching on and off, preemption),
streaming, stops, and errors that leave no state behind."""
import numpy as np
import pytest

import tffedu.engine
import tffedu.model
from tffedu.engine import Engine, engine_of, generate_batch, stream
from tffedu.errors import ContextOverflowError, EngineError, SamplingError
from hf_models import hf_logits, rel_err, tiny_qwen3, write_gguf


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    "A tiny random Qwen3 (GQA 2:1, head_dim 16) with a real (truncated) Qwen2 vocabulary."
    hf = tiny_qwen3(hidden=64, heads=4, kv_heads=2, seed=5, std=0.08)
    path = write_gguf(hf, tmp_path_factory.mktemp("engine") / "m.gguf", "F32")
    m = tffedu.engine.load(path, n_ctx=256)
    m.hf = hf
    return m


def contiguous(model, prompt, **kw):
    "Chapter 08's one-sequence loop over a contiguous cache: the oracle of the engine."
    return tffedu.model.Model.generate(model, prompt, **kw)


def prompts_of(model, n, rng, lo=3, hi=40):
    V = model.config.vocab_size
    return [rng.integers(0, min(V, 400), size=rng.integers(lo, hi)).tolist() for _ in range(n)]


@pytest.mark.parametrize("page_size", [1, 3, 32, 1000])
def test_paged_logits_equal_contiguous_and_hf(model, page_size):
    """Every prefix of a sequence as its own request in ONE flat batch: row L-1 of the contiguous
    logits (and of HF's) must equal the paged engine's logits of the prefix of length L."""
    ids = prompts_of(model, 1, np.random.default_rng(page_size), 23, 24)[0]
    eng = Engine(model, page_size=page_size, max_batch=len(ids), token_budget=10_000,
                 num_pages=-(-len(ids) // page_size) * len(ids))
    for L in range(1, len(ids) + 1):
        eng.add(ids[:L], max_new_tokens=1)
    step = eng._admit()
    assert len(step.reqs) == len(ids)               # one prefill step of 23 sequences
    paged = eng._forward(step, logits=True)[1]
    assert rel_err(paged, tffedu.model.Model.logits(model, ids)) < 1e-5   # the contiguous cache
    assert rel_err(model.logits(ids), tffedu.model.Model.logits(model, ids)) < 1e-5
    assert rel_err(paged, hf_logits(model.hf, ids)) < 1e-4


def test_batch_equals_one_at_a_time_greedy(model):
    rng = np.random.default_rng(0)
    prompts = prompts_of(model, 6, rng)
    alone = [model.generate(p, max_new_tokens=12) for p in prompts]
    assert [a.tokens for a in alone] == [contiguous(model, p, max_new_tokens=12).tokens for p in prompts]
    for caching in (False, True):
        engine_of(model, max_batch=4, prefix_caching=caching)   # 6 prompts, 4 slots: some wait
        outs = model.generate_batch(prompts, max_new_tokens=12)
        assert [o.tokens for o in outs] == [a.tokens for a in alone]
        assert [o.text for o in outs] == [a.text for a in alone]


def test_batch_equals_one_at_a_time_sampled(model):
    prompts = prompts_of(model, 5, np.random.default_rng(1))
    kw = dict(max_new_tokens=10, temperature=0.9, top_k=50, top_p=0.9, seed=123)
    alone = [model.generate(p, **kw).tokens for p in prompts]
    assert alone == [contiguous(model, p, **kw).tokens for p in prompts]
    assert [o.tokens for o in generate_batch(model, prompts, **kw)] == alone


def test_any_finishing_order_and_shared_prefixes(model):
    """Requests of different lengths join and leave in every order; prompts share prefixes (and two
    are identical, admitted in the same step); with and without prefix caching."""
    rng = np.random.default_rng(2)
    base = prompts_of(model, 1, rng, 40, 41)[0]
    prompts = [base + p for p in prompts_of(model, 4, rng, 1, 9)] + [base, base, base[:17]]
    lengths = [3, 11, 1, 7, 5, 5, 9]
    alone = [model.generate(p, max_new_tokens=n).tokens for p, n in zip(prompts, lengths)]
    for caching in (False, True):
        eng = Engine(model, page_size=8, max_batch=3, prefix_caching=caching)
        reqs = [eng.add(p, max_new_tokens=n) for p, n in zip(prompts, lengths)]
        eng.run()
        assert [r.tokens for r in reqs] == alone
        assert eng.cache.n_free_pages == eng.cache.num_pages    # everything returned
        saved = eng.stats["cached_tokens"]
        assert (saved > 0) == caching, saved


def test_preemption_keeps_results(model):
    "A cache too small for all sequences at once: requests are preempted and recomputed, same tokens."
    prompts = prompts_of(model, 4, np.random.default_rng(3), 10, 20)
    alone = [model.generate(p, max_new_tokens=20).tokens for p in prompts]
    eng = Engine(model, page_size=4, num_pages=16, max_batch=4)
    reqs = [eng.add(p, max_new_tokens=20) for p in prompts]
    eng.run()
    assert eng.stats["preempted"] > 0
    assert [r.tokens for r in reqs] == alone


def test_stream_pieces_join_to_the_text(model):
    "Random tokens of a byte-level vocabulary split UTF-8 characters: pieces must never cut one."
    for seed in range(4):
        kw = dict(max_new_tokens=24, temperature=1.5, seed=seed)
        pieces = list(stream(model, "hello 世界", **kw))
        out = model.generate("hello 世界", **kw)
        assert "".join(pieces) == out.text
        for p in pieces:
            p.encode("utf-8")                       # a str: whole characters only
    assert engine_of(model).busy is False


def test_stream_stopped_early_frees_pages(model):
    eng = engine_of(model, page_size=4)
    gen = model.stream("the cat", max_new_tokens=50, ignore_eos=True)
    next(gen)
    assert eng.busy and eng.cache.n_free_pages < eng.cache.num_pages
    gen.close()
    assert not eng.busy and eng.cache.n_free_pages == eng.cache.num_pages


def test_stop_strings_and_eos(model):
    prompt = prompts_of(model, 1, np.random.default_rng(4))[0]
    full = model.generate(prompt, max_new_tokens=30, ignore_eos=True)
    stop = full.text[len(full.text) // 2:][:3]
    if not stop.strip():
        pytest.skip("the random continuation has no usable stop string")
    got = model.generate_batch([prompt], max_new_tokens=30, stop=stop, ignore_eos=True)[0]
    ref = model.generate(prompt, max_new_tokens=30, stop=stop, ignore_eos=True)
    assert got.tokens == ref.tokens and got.stop_reason == ref.stop_reason == "stop"
    assert stop in got.text


def test_errors_leave_no_state(model):
    eng = engine_of(model)
    prompts = prompts_of(model, 3, np.random.default_rng(5))
    with pytest.raises(SamplingError, match="top_p"):
        model.generate_batch(prompts, top_p=0.0)
    with pytest.raises(SamplingError, match="max_new_tokens"):
        model.generate_batch(prompts, max_new_tokens=-1)
    with pytest.raises(ContextOverflowError):
        model.generate_batch(prompts + [[1] * 250], max_new_tokens=10)
    with pytest.raises(SamplingError, match="list of prompts"):
        model.generate_batch("a single string")
    assert not eng.busy and eng.cache.n_free_pages == eng.cache.num_pages
    assert model.generate_batch(prompts, max_new_tokens=0)[0].tokens == []
    with pytest.raises(EngineError, match="max_batch"):
        Engine(model, max_batch=0)


@pytest.mark.slow
def test_smollm2_batch_equals_generate():
    m = tffedu.load(n_ctx=512)
    prompts = ["The capital of France is", "def add(a, b):", "中国的首都是"]
    alone = [m.generate(p, max_new_tokens=10) for p in prompts]
    outs = m.generate_batch(prompts, max_new_tokens=10)
    assert [o.tokens for o in outs] == [a.tokens for a in alone]
    pieces = list(m.stream(prompts[2], max_new_tokens=10))
    assert "".join(pieces) == alone[2].text
