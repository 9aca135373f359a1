"""The engine (chapter 14): paged == contiguous logits, generate_batch == generate one at a time
(greedy and seeded sampling, any finishing order, prefix caching on and off, preemption),
streaming, stops, and errors that leave no state behind."""
import os

import numpy as np
import pytest

import tffedu.engine
import tffedu.runtime
import tffedu.model
from tffedu.engine import Engine, engine_of, generate_batch, stream
from tffedu.errors import ContextOverflowError, EngineError, SamplingError
from tffedu.sampling import SamplingParams
from hf_models import SamplingLoop, hf_logits, rel_err, tiny_qwen3, write_gguf


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    "A tiny random Qwen3 (GQA 2:1, head_dim 16) with a real (truncated) Qwen2 vocabulary."
    hf = tiny_qwen3(hidden=64, heads=4, kv_heads=2, seed=5, std=0.08)
    path = write_gguf(hf, tmp_path_factory.mktemp("engine") / "m.gguf", "F32")
    m = tffedu.engine.load(path, n_ctx=256)
    m.hf = hf
    m.loop = SamplingLoop.of(m)                # chapter 08's loop over the same weights
    return m


def contiguous(model, prompt, **kw):
    "Chapter 08's one-sequence loop over a contiguous cache: the oracle of the engine."
    return model.loop.generate(prompt, **kw)


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
    batch = eng.scheduler.schedule()
    assert len(batch.reqs) == len(ids)              # one prefill step of 23 sequences
    batch.input.logits = True
    paged = eng._read(batch, eng.runner.launch(batch.input))[1]
    assert rel_err(paged, model.loop.logits(ids)) < 1e-5   # the contiguous cache
    assert rel_err(model.logits(ids), model.loop.logits(ids)) < 1e-5
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


def test_stream_returns_the_finish_reason(model):
    "The generator's return value is what generate() reports: length, a stop string, or an EOS."
    prompt = prompts_of(model, 1, np.random.default_rng(7))[0]
    full = model.generate(prompt, max_new_tokens=12, ignore_eos=True)
    cases = [dict(max_new_tokens=5), dict(max_new_tokens=12, stop=[full.text[-3:]]), dict(max_new_tokens=40)]
    for kw in cases:
        gen, pieces = model.stream(prompt, **kw), []
        with pytest.raises(StopIteration) as end:
            while True:
                pieces.append(next(gen))
        ref = model.generate(prompt, **kw)
        assert end.value.value == ref.stop_reason and "".join(pieces) == ref.text, kw
    assert model.generate(prompt, max_new_tokens=5).stop_reason == "length"


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


# --- chunked prefill and mixed steps ---------------------------------------------------------

def test_chunked_prefill_equals_one_step(model):
    """A prompt longer than the budget is prefilled in ceil(n / budget) chunks (chunks cross page
    boundaries), gives no token before its last chunk, and then the same greedy tokens as one
    prefill step and as chapter 08's loop."""
    prompt = prompts_of(model, 1, np.random.default_rng(10), 101, 102)[0]
    ref = contiguous(model, prompt, max_new_tokens=8, ignore_eos=True).tokens
    one = Engine(model, page_size=8, token_budget=4096)
    r1 = one.add(prompt, max_new_tokens=8, ignore_eos=True)
    one.run()
    assert r1.tokens == ref and r1.n_chunks == 1
    for budget in (1, 13, 50, 100):
        eng = Engine(model, page_size=8, token_budget=budget)
        req = eng.add(prompt, max_new_tokens=8, ignore_eos=True)
        n_steps = -(-len(prompt) // budget)
        for _ in range(n_steps - 1):
            assert eng.step() == [] and req.tokens == []      # mid-prompt chunks sample nothing
        assert [r for r, _ in eng.step()] == [req]             # the last chunk gives the first token
        eng.run()
        chunks = [c for kind, _, (c,) in eng.history if kind == "prefill"]
        assert chunks == [budget] * (n_steps - 1) + [len(prompt) - budget * (n_steps - 1)]
        assert req.n_chunks == n_steps == eng.stats["prefill_chunks"]
        assert eng.stats["prefill_tokens"] == len(prompt) and eng.stats["decode_tokens"] == 7
        assert req.tokens == ref, budget
        assert eng.cache.n_free_pages == eng.cache.num_pages


def test_long_prompt_does_not_stall_decoders(model):
    "A long prompt arriving while two requests decode: every step keeps their decode rows."
    rng = np.random.default_rng(11)
    short = prompts_of(model, 2, rng, 5, 9)
    long = prompts_of(model, 1, rng, 150, 151)[0]
    eng = Engine(model, token_budget=20)
    a, b = (eng.add(p, max_new_tokens=16, ignore_eos=True) for p in short)
    eng.step()
    assert len(a.tokens) == len(b.tokens) == 1
    c = eng.add(long, max_new_tokens=5, ignore_eos=True)
    start = len(eng.history)
    eng.run()
    prefill_steps = [h for h in eng.history[start:] if c.sid in h[1] and h[2][h[1].index(c.sid)] > 1]
    assert len(prefill_steps) == -(-len(long) // 18)                # 20 - 2 decode rows
    for kind, sids, chunks in prefill_steps:
        assert kind == "mixed" and sids[:2] == [a.sid, b.sid] and chunks[:2] == [1, 1]
        assert sum(chunks) <= 20
    assert eng.stats["mixed_steps"] == len(prefill_steps)
    for r, p, n in ((a, short[0], 16), (b, short[1], 16), (c, long, 5)):
        assert r.tokens == contiguous(model, p, max_new_tokens=n, ignore_eos=True).tokens


def test_mixed_steps_schedule(model):
    """The schedule itself, worked by hand: a 10-token and a 3-token prompt, 2 tokens each, 4 tokens
    a step (decode rows first, then the oldest unfinished prompt)."""
    rng = np.random.default_rng(12)
    eng = Engine(model, token_budget=4, prefix_caching=False)
    for n in (10, 3):
        eng.add(prompts_of(model, 1, rng, n, n + 1)[0], max_new_tokens=2, ignore_eos=True)
    eng.run()
    assert eng.history == [("prefill", [0], [4]), ("prefill", [0], [4]),
                           ("prefill", [0, 1], [2, 2]), ("mixed", [0, 1], [1, 1]),
                           ("decode", [1], [1])]


def test_mixed_steps_with_prefix_caching_and_sampling(model):
    """Requests arriving while others decode, sharing a long prefix, greedy and seeded sampling
    mixed, in chunks of 11 tokens: each gets what it gets alone."""
    rng = np.random.default_rng(13)
    base = prompts_of(model, 1, rng, 45, 46)[0]
    prompts = [base + p for p in prompts_of(model, 5, rng, 2, 30)] + prompts_of(model, 2, rng, 20, 60)
    kws = [dict(max_new_tokens=9), dict(max_new_tokens=6, temperature=0.8, top_k=40, seed=7),
           dict(max_new_tokens=12), dict(max_new_tokens=5, temperature=1.2, top_p=0.9, seed=8),
           dict(max_new_tokens=3, temperature=0.7, seed=9), dict(max_new_tokens=10),
           dict(max_new_tokens=7, temperature=1.0, seed=10)]
    alone = [contiguous(model, p, ignore_eos=True, **kw).tokens for p, kw in zip(prompts, kws)]
    for caching in (False, True):
        eng = Engine(model, page_size=4, max_batch=4, token_budget=11, prefix_caching=caching)
        reqs = []
        for p, kw in zip(prompts, kws):              # one new request every other step
            kw = dict(kw)
            params = tffedu.engine._sampling(**{k: v for k, v in kw.items() if k != "max_new_tokens"})
            reqs.append(eng.add(p, params, kw["max_new_tokens"], ignore_eos=True))
            eng.step()
            eng.step()
        eng.run()
        assert [r.tokens for r in reqs] == alone, caching
        assert eng.stats["mixed_steps"] > 0 and eng.stats["prefill_chunks"] > len(prompts)
        assert (eng.stats["cached_tokens"] > 0) == caching
        assert eng.cache.n_free_pages == eng.cache.num_pages


def test_preemption_of_partial_prefills(model):
    """Pages run out while a prompt is half prefilled: a decoding request needs a page, the newest
    one (the prompt) is preempted and restarts later; the tokens stay the same."""
    rng = np.random.default_rng(14)
    short, long = prompts_of(model, 1, rng, 6, 7)[0], prompts_of(model, 1, rng, 60, 61)[0]
    alone = [contiguous(model, p, max_new_tokens=n, ignore_eos=True).tokens
             for p, n in ((short, 40), (long, 5))]
    for caching in (False, True):
        # 18 pages of 4: the short one's 2 + the long one's 15, one left; decoding needs more
        eng = Engine(model, page_size=4, num_pages=18, token_budget=8, prefix_caching=caching)
        partial, preempt = [], eng.scheduler.preempt

        def spy(victim):
            partial.append((victim.sid, eng.scheduler.prefilling(victim), eng.cache.n_computed(victim.sid)))
            preempt(victim)
        eng.scheduler.preempt = spy
        reqs = [eng.add(short, max_new_tokens=40, ignore_eos=True),
                eng.add(long, max_new_tokens=5, ignore_eos=True)]
        eng.run()
        assert partial and all(sid == 1 and pre and 0 < n < 60 for sid, pre, n in partial), partial
        assert [r.tokens for r in reqs] == alone
        assert eng.stats["preempted"] == len(partial)
        assert eng.cache.n_free_pages == eng.cache.num_pages


def test_generate_of_a_long_prompt_is_chunked(model):
    "generate and generate_batch go through the same chunks: the engine's budget, not one step."
    rng = np.random.default_rng(15)
    prompts = prompts_of(model, 3, rng, 60, 120)
    alone = [contiguous(model, p, max_new_tokens=6).tokens for p in prompts]
    eng = engine_of(model, token_budget=32)
    assert [model.generate(p, max_new_tokens=6).tokens for p in prompts] == alone
    assert [o.tokens for o in model.generate_batch(prompts, max_new_tokens=6)] == alone
    assert eng.stats["prefill_chunks"] > 2 * len(prompts)
    engine_of(model, token_budget=512)                  # the default again for the other tests


def test_measure_decode_times_the_whole_batch(model, monkeypatch):
    "measure_decode prefills everything first, then every step decodes all batch_size together."
    made = []

    class Recording(Engine):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            made.append(self)
    monkeypatch.setattr(tffedu.engine, "Engine", Recording)
    prompts = prompts_of(model, 3, np.random.default_rng(16), 80, 100)   # 8 x ~90 > 512 tokens
    rate = tffedu.engine.measure_decode(model, prompts, 8, new_tokens=5)
    assert rate > 0
    (eng,) = made
    kinds = [(kind, len(sids)) for kind, sids, _ in eng.history]
    assert kinds == [("prefill", 8)] + [("decode", 8)] * 4
    assert eng.stats["decode_tokens"] == 8 * 4


def test_history_stays_bounded(model, monkeypatch):
    "An engine that serves for long keeps only the latest HISTORY_STEPS steps in `history`."
    monkeypatch.setattr(tffedu.engine, "HISTORY_STEPS", 5)
    eng = Engine(model, max_batch=2)
    for i in range(4):
        eng.add([1, 2, 3 + i], max_new_tokens=6)
        eng.run()
    assert eng.stats["steps"] > 10 and 5 <= len(eng.history) <= 10
    assert eng.history[-1][0] == "decode"


def test_token_budget_is_checked(model):
    for bad in (0, -3, True, 2.0, "64"):
        with pytest.raises(EngineError, match="token_budget"):
            Engine(model, token_budget=bad)


def test_measure_decode_rejects_bad_arguments(model):
    from tffedu.engine import measure_decode
    from tffedu.errors import EngineError, SamplingError
    for prompts, b in [([[1, 2]], 0), ([[1, 2]], True), ([[1, 2]], 2.0), ([[1, 2]], -3)]:
        with pytest.raises(EngineError, match="batch_size"):
            measure_decode(model, prompts, b, new_tokens=2)
    for prompts in ([], "text", None):
        with pytest.raises(SamplingError):
            measure_decode(model, prompts, 2, new_tokens=2)


def _overlap_run(model, overlap, prompts, eos=(), cancel_at=None, **kw):
    "Every request's tokens and finish reason, the stats, and what the prefix cache holds after."
    eng = Engine(model, page_size=4, max_batch=8, overlap=overlap, **kw)
    reqs = [eng.add(p, max_new_tokens=n, ignore_eos=i % 3 == 0) for i, (p, n) in enumerate(prompts)]
    model.eos_ids, saved = set(eos), model.eos_ids
    try:
        for s in range(10_000):
            if not eng.busy:
                break
            if s == cancel_at:
                eng.cancel(reqs[1])
            eng.step()
    finally:
        model.eos_ids = saved
    cached = [eng.cache.cached_prefix(r.ids) for r in reqs]      # pages hashed from the real tokens
    return [r.tokens for r in reqs], [r.finish_reason for r in reqs], eng.stats, cached, eng.cache.n_free_pages


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_overlap_gives_the_same_tokens(model, seed):
    """Decode steps queued before the step before them is read (what the GPU does by default):
    the same tokens, ends, counts, free pages and prefix cache as one step at a time — with
    requests ending by length and by an end-of-text token (their queued row wasted), and a
    request cancelled while a step holding its row is queued."""
    rng = np.random.default_rng(seed)
    prompts = [(p, int(rng.integers(2, 30))) for p in prompts_of(model, 6, rng)]
    plain = _overlap_run(model, False, prompts)
    # an end of text that request 1 (and maybe others) produces mid-way
    eos = {plain[0][1][len(plain[0][1]) // 2]}
    for kw in (dict(), dict(eos=eos), dict(cancel_at=5), dict(eos=eos, cancel_at=7, prefix_caching=False)):
        want, got = _overlap_run(model, False, prompts, **kw), _overlap_run(model, True, prompts, **kw)
        assert got[0] == want[0] and got[1] == want[1], kw
        assert got[3] == want[3] and got[4] == want[4], kw
        assert {k: v for k, v in got[2].items() if k != "overlapped"} == {
            k: v for k, v in want[2].items() if k != "overlapped"}, kw
        assert got[2]["overlapped"] > 0 and want[2]["overlapped"] == 0, kw


def test_overlap_only_for_greedy_decode_steps(model):
    "Sampling needs the logits of the step before: no step is queued ahead while a request samples."
    eng = Engine(model, overlap=True)
    eng.add([1, 2, 3], params=SamplingParams(temperature=0.7, seed=1), max_new_tokens=12)
    eng.add([4, 5, 6], max_new_tokens=12)
    eng.run()
    assert eng.stats["overlapped"] == 0
    with pytest.raises(EngineError, match="overlap"):
        Engine(model, overlap="yes")


def test_ids_from_last_needs_the_rows_of_the_step_before(model):
    "A step may take its ids from the step before only if that step had as many rows (and ids)."
    from tffedu.errors import GraphError
    from tffedu.runner import StepInput
    eng = Engine(model, max_batch=4)
    reqs = [eng.add([1, 2, 3, 4], max_new_tokens=4), eng.add([5, 6], max_new_tokens=4)]
    eng.step()                                               # the prefill of both: next_ids [2]
    cache, run = eng.cache, eng.runner
    sids = [r.sid for r in reqs]
    for r in reqs:
        cache.extend(r.sid)
    dec = StepInput.build(cache, "decode", sids, [r.seq_len - 1 for r in reqs], [1, 1], [r.ids[-1] for r in reqs])
    want = run.launch(dec).result()["next_ids"]
    for r in reqs:
        cache.extend(r.sid)
    nxt = StepInput.build(cache, "decode", sids, [r.seq_len for r in reqs], [1, 1])   # ids: the step before's
    assert nxt.ids_from_last and run.launch(nxt).result()["next_ids"].shape == want.shape
    p = reqs[0].prompt
    run.run(StepInput.build(cache, "logits", [sids[0]], [0], [len(p)], p))
    with pytest.raises(GraphError, match="has 0 next_ids"):   # a logits step leaves none
        run.launch(nxt)


def test_last_captured_is_the_bucket_run_last(model):
    """The profilers replay the captured step of a kind that ran last (the shared block holds its
    inputs only): the most recently used bucket of that kind, and a GraphError before any."""
    from tffedu.errors import GraphError
    run = Engine(model, max_batch=4).runner
    with pytest.raises(GraphError, match="no decode step has been captured"):
        run.last_captured("decode")
    for key in [("decode", 4, 4, 8), ("prefill", 64, 1, 8), ("decode", 2, 2, 8)]:
        run.executors[key] = f"ex {key}"
        run.captured[key] = f"graph {key}"
    run.executors.move_to_end(("decode", 4, 4, 8))           # used again, after the others
    assert run.last_captured("decode") == ("ex ('decode', 4, 4, 8)", "graph ('decode', 4, 4, 8)")
    assert run.last_captured("prefill")[1] == "graph ('prefill', 64, 1, 8)"
    del run.captured[("decode", 4, 4, 8)]                    # built but never captured: skipped
    assert run.last_captured("decode")[0] == "ex ('decode', 2, 2, 8)"


def test_a_failing_step_names_its_methods(model, monkeypatch):
    """help(Engine) lists every method under its own name (no `step = _step(self)`), and a
    traceback from inside a decode step names Engine.step and ModelRunner.launch."""
    import pydoc
    import traceback
    text = pydoc.render_doc(Engine, renderer=pydoc.plaintext)
    assert " = _" not in text
    for name in ("add", "cancel", "check", "logits", "run", "step"):
        assert getattr(Engine, name).__qualname__ == f"Engine.{name}" and f"|  {name}(self" in text
    eng = Engine(model)
    eng.add([1, 2, 3], max_new_tokens=4)
    eng.step()                                            # the prefill

    def broken_kernel(self, *args, **kwargs):
        raise RuntimeError("a kernel failed")
    monkeypatch.setattr(tffedu.runtime.Executor, "launch", broken_kernel)
    with pytest.raises(RuntimeError) as failed:
        eng.step()                                        # a decode step
    frames = [f.f_code.co_qualname for f, _ in traceback.walk_tb(failed.value.__traceback__)]
    assert "Engine.step" in frames and "ModelRunner.launch" in frames, frames


def test_logprobs_are_the_log_softmax_of_hf_logits(model):
    """A request with top_logprobs=k records, for every new token, log p(token) and the k likeliest
    under softmax of the logits (torch's log_softmax of HF's logits along the same tokens); asking
    changes none of the tokens, greedy or sampled."""
    import torch
    rng = np.random.default_rng(3)
    prompt = prompts_of(model, 1, rng, 9, 10)[0]
    for params in (SamplingParams(), SamplingParams(temperature=0.9, seed=4)):
        eng = Engine(model)
        plain, asked = eng.add(prompt, params, 6, ignore_eos=True), eng.add(prompt, params, 6, ignore_eos=True, top_logprobs=3)
        eng.run()
        assert asked.tokens == plain.tokens and len(asked.logprobs) == 6 and plain.logprobs == []
        ref = torch.log_softmax(torch.tensor(hf_logits(model.hf, prompt + asked.tokens), dtype=torch.float64), -1)
        for i, (lp, top) in enumerate(asked.logprobs):
            row = ref[len(prompt) - 1 + i]
            assert lp == pytest.approx(float(row[asked.tokens[i]]), abs=1e-4)
            want = torch.topk(row, 3)
            assert [t for t, _ in top] == want.indices.tolist()
            assert [v for _, v in top] == pytest.approx(want.values.tolist(), abs=1e-4)


@pytest.mark.parametrize("k", [-1, 21, 1.5, True, "3"])
def test_bad_top_logprobs_is_a_sampling_error(model, k):
    eng = Engine(model)
    with pytest.raises(SamplingError, match="top_logprobs"):
        eng.add([1, 2, 3], top_logprobs=k)
    assert not eng.busy


# --- sizing: the K/V pool and the context from memory --------------------------------------------

@pytest.mark.parametrize("share", [0, -0.1, 1.5, float("nan"), True, "0.5"])
def test_kv_memory_must_be_a_share(model, share):
    with pytest.raises(EngineError, match="kv_memory"):
        Engine(model, kv_memory=share)


def test_kv_token_bytes_is_two_tensors_per_layer(model):
    c = model.config                               # K and V, n_head_kv x head_dim each, per layer
    per_layer = 2 * c.n_head_kv * c.head_dim
    assert tffedu.engine.kv_token_bytes(c, "cpu") == per_layer * c.n_layer * np.dtype(np.float32).itemsize
    assert tffedu.engine.kv_token_bytes(c, "cuda") == per_layer * c.n_layer * np.dtype(np.float16).itemsize


def test_default_context_is_the_trained_one_capped_by_memory(tmp_path, monkeypatch, capsys):
    hf = tiny_qwen3(hidden=64, heads=4, kv_heads=2, seed=5, std=0.08)
    path = write_gguf(hf, tmp_path / "m.gguf", "F32")
    trained = hf.config.max_position_embeddings
    assert tffedu.engine.load(path).n_ctx == trained and capsys.readouterr().err == ""
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    token = tffedu.engine.kv_token_bytes(tffedu.engine.load(path, n_ctx=8).config, "cpu")
    monkeypatch.setattr(tffedu.engine, "HOST_KV_MEMORY", 100.5 * token / ram)   # room for 100 tokens
    m = tffedu.engine.load(path)
    assert m.n_ctx == 100 and f"n_ctx 100 of the {trained}" in capsys.readouterr().err
    assert Engine(m).cache.num_pages * 32 >= 100                     # one full context fits
    with pytest.raises(EngineError, match="does not fit"):            # asked for more than fits
        Engine(tffedu.engine.load(path, n_ctx=200))
    monkeypatch.setattr(tffedu.engine, "HOST_KV_MEMORY", 0.5 * token / ram)
    with pytest.raises(EngineError, match="no memory is left"):
        tffedu.engine.load(path)


def test_generate_batch_admits_every_prompt_at_once(model):
    """32 prompts are decoded in one batch (MAX_BATCH = 64 by default), not in waves."""
    ps = prompts_of(model, 32, np.random.default_rng(3), lo=3, hi=6)
    engine_of(model, prefix_caching=False)
    model.generate_batch(ps, max_new_tokens=3, ignore_eos=True)
    eng = engine_of(model)
    assert max(len(sids) for kind, sids, _ in eng.history if kind == "decode") == 32


def test_a_new_shared_engine_replaces_the_old_one(model):
    old = engine_of(model)
    new = engine_of(model, max_batch=3)
    assert new is engine_of(model) and new is not old and new.scheduler.max_batch == 3


def test_pages_are_counted_or_sized_not_both(model):
    with pytest.raises(EngineError, match="not both"):
        Engine(model, num_pages=8, kv_memory=0.5)


def test_warm_up_runs_each_shape_and_leaves_no_trace(model):
    """Engine.warm_up: a step of every batch bucket and the long prefills, then the engine as it was
    (cache empty, stats and history unchanged) and generation unchanged."""
    eng = Engine(model, max_batch=8, token_budget=256, prefix_caching=True)
    prompt = prompts_of(model, 1, np.random.default_rng(3))[0]
    stats, history = dict(eng.stats), list(eng.history)
    assert eng.warm_up() > 0
    assert eng.stats == stats and eng.history == history
    assert not eng.busy and eng.cache.n_free_pages == eng.cache.num_pages
    decodes = {key[2] for key in eng.runner.executors if key[0] == "decode"}
    assert {1, 2, 4, 8} <= decodes, decodes
    req = eng.add(prompt, max_new_tokens=8)
    while not req.done:
        eng.step()
    assert req.tokens == contiguous(model, prompt, max_new_tokens=8).tokens


def test_warm_up_keeps_every_graph_it_made(monkeypatch):
    """SmolLM2's widest decode step needs the biggest arena (a row of 49,152 logits per sequence),
    and a growth drops every graph made before it: warm_up runs its shapes again, so each one it
    made is still there when it returns."""
    from tffedu.runner import ModelRunner
    from tffedu.assets import default_model_path
    smol = tffedu.engine.load(default_model_path())
    eng = Engine(smol, max_batch=64, token_budget=256, max_graphs=64)
    made, executor = set(), ModelRunner.executor
    monkeypatch.setattr(ModelRunner, "executor", lambda self, *key: made.add(key) or executor(self, *key))
    grown = []
    memory = ModelRunner._memory
    monkeypatch.setattr(ModelRunner, "_memory", lambda self, n: grown.append(self.stats["arena_bytes"] < n) or memory(self, n))
    eng.warm_up()
    assert sum(grown[1:]) >= 1                        # a later step did grow the arena (what this test is about)
    assert made == set(eng.runner.executors), made - set(eng.runner.executors)


def test_warm_up_plans_every_prefill_bucket(tmp_path, monkeypatch):
    """A prompt of any length up to the token budget finds its prefill bucket planned: the runner's
    buckets double up to BUCKET_STEP, then grow by it (256 here, so that a small model shows it)."""
    import tffedu.runner as R
    monkeypatch.setattr(R, "BUCKET_STEP", 256)
    hf = tiny_qwen3(hidden=64, heads=4, kv_heads=2, seed=6, std=0.08, ctx=2048)
    m = tffedu.engine.load(write_gguf(hf, tmp_path / "m.gguf", "F32"), n_ctx=2048)
    eng = Engine(m, max_batch=2, token_budget=1000)
    eng.warm_up()
    most = min(1000, m.n_ctx - 2, eng.cache.num_pages * eng.cache.page_size // 2)
    assert most > 512
    want = {R.bucket(n) for n in range(128, most + 1)}
    assert want >= {128, 256, 512, 768}
    assert want <= {key[1] for key in eng.runner.executors if key[0] == "prefill"}


@pytest.mark.parametrize("sizes", [[0], [3, "4"], [True], [1, 10**9], [], 2.5])
def test_warm_up_refuses_bad_sizes(model, sizes):
    eng = Engine(model, max_batch=8, token_budget=256)
    with pytest.raises(EngineError, match="warm_up: batch sizes"):
        eng.warm_up(sizes)
    assert not eng.busy and eng.stats["steps"] == 0


def test_warm_up_refuses_a_busy_engine(model):
    eng = Engine(model, max_batch=4, token_budget=256)
    req = eng.add(prompts_of(model, 1, np.random.default_rng(4))[0], max_new_tokens=4)
    with pytest.raises(EngineError, match="before any request"):
        eng.warm_up()
    while not req.done:
        eng.step()
    assert req.tokens == contiguous(model, req.prompt, max_new_tokens=4).tokens
