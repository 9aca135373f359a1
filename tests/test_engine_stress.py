"""A seeded audit of the engine's state machinery on the CPU, in combinations the chapter tests do
not reach: speculative decoding (prompt lookup, a draft model, a sliding-window draft model) with
prefix caching, preemption, stop strings, logprobs and tiny page pools; streams parked and
preempted through a sliding window. The oracle is always `generate` alone on a fresh engine with
no drafts (each of its tokens checked against HF's greedy choice in test_engine/test_speculative)."""
import threading

import numpy as np
import pytest

import tffedu.engine
from tffedu.engine import Engine, engine_of
from tffedu.sampling import SamplingParams
from tffedu.speculative import DraftModel, PromptLookup
from hf_models import tiny_mistral, tiny_qwen3, write_gguf


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("stress")
    return {"qwen3": write_gguf(tiny_qwen3(hidden=64, heads=4, kv_heads=2, seed=5, std=0.08), d / "q.gguf", "F32"),
            "other": write_gguf(tiny_qwen3(hidden=32, heads=2, kv_heads=1, seed=9, std=0.08), d / "o.gguf", "F32"),
            "mistral_w": write_gguf(tiny_mistral(hidden=64, heads=4, kv_heads=2, seed=7, window=6), d / "w.gguf", "F32"),
            "mistral_w_other": write_gguf(tiny_mistral(hidden=32, heads=2, kv_heads=1, seed=9, window=6),
                                          d / "wo.gguf", "F32")}


def repetitive(seed):
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 400, 12).tolist()
    return [base * 4, base[:5] * 6 + base, rng.integers(0, 400, 30).tolist()]


def no_pages_held(eng):
    assert eng.cache.n_free_pages == eng.cache.num_pages
    for d in eng.drafters.values():
        if isinstance(d, DraftModel):
            assert d.cache.n_free_pages == d.cache.num_pages and not d.seen


@pytest.mark.parametrize("page_size", [1, 2, 4])
def test_a_sliding_window_draft_model_rolls_back_past_pages_it_gave_up(files, page_size):
    """A windowed draft model that the target often overrules: its own cache slid past pages (as it
    drafted k tokens ahead) that rolling back to the accepted tokens needs again. Exact, no error."""
    m = tffedu.engine.load(files["mistral_w"], n_ctx=256)
    ps = repetitive(0)
    want = [m.generate(p, max_new_tokens=40).tokens for p in ps]
    eng = Engine(m, page_size=page_size, num_pages=400)
    reqs = [eng.add(p, max_new_tokens=40, speculative=f"draft:{files['mistral_w_other']}") for p in ps]
    eng.run()
    assert [r.tokens for r in reqs] == want
    assert eng.stats["accepted"] < eng.stats["drafted"]          # rejections happened
    no_pages_held(eng)


def test_a_stream_parked_and_preempted_through_a_window_comes_back(files):
    """A sliding window lets a stream run far longer than the pool's pages. Parked (its reader
    paused) while another call needs the pages, it must not be preempted into a state it can never
    be re-admitted from (all of its tokens' pages at once): the reader resumes and gets all the text."""
    m = tffedu.engine.load(files["mistral_w"], n_ctx=256)
    want = m.generate([5, 6, 7], max_new_tokens=120, ignore_eos=True).text
    others = [m.generate(p, max_new_tokens=60, ignore_eos=True).tokens for p in ([9, 10, 11], [12, 13])]
    eng = engine_of(m, page_size=2, num_pages=8)        # a window of 6: 4 pages a sequence at most
    s = m.stream([5, 6, 7], max_new_tokens=120, ignore_eos=True)
    got = [next(s) for _ in range(50)]                  # 50 tokens: 27 pages' worth, held in 4
    assert [g.tokens for g in m.generate_batch([[9, 10, 11], [12, 13]], max_new_tokens=60, ignore_eos=True)] == others
    t = threading.Thread(target=lambda: got.extend(s), daemon=True)
    t.start()
    t.join(60)
    assert not t.is_alive(), "the stream never came back"
    assert "".join(got) == want
    no_pages_held(eng)


@pytest.mark.parametrize("name", ["qwen3", "mistral_w"])
def test_random_mixes_of_every_path_give_each_requests_own_tokens(files, name):
    """Seeded random mixes: prompts that repeat (drafts are found) or share a prefix, page sizes 1 to
    8, pools barely larger than the longest request (preemption), prefix caching on or off, 1 to 5
    slots, max_new_tokens 1 to 25, stop strings, logprobs, greedy or sampled, each request drafting
    with nothing, prompt lookup, or a draft model (itself, or another one). Every greedy request
    gets its tokens from `generate` alone; a sampled one that does not draft gets its seeded tokens
    too; every page comes back."""
    other = files["other" if name == "qwen3" else "mistral_w_other"]
    m = tffedu.engine.load(files[name], n_ctx=256)
    ref = tffedu.engine.load(files[name], n_ctx=256)
    for trial in range(12):
        rng = np.random.default_rng(trial)
        base = rng.integers(0, 400, int(rng.integers(3, 10))).tolist()
        ps = [base * int(rng.integers(2, 5)) if kind == 0 else
              base + rng.integers(0, 400, int(rng.integers(1, 12))).tolist() if kind == 1 else
              rng.integers(0, 400, int(rng.integers(1, 20))).tolist() for kind in rng.integers(0, 3, rng.integers(2, 6))]
        P = int(rng.choice([1, 2, 3, 4, 8]))
        maxn = [int(rng.choice([1, 2, 3, 10, 25])) for _ in ps]
        specs = [rng.choice(["none", "ngram", "pl", "self", "other"]) for _ in ps]
        kws = [{} if rng.integers(3) else dict(temperature=0.8, seed=11) for _ in ps]
        lps = [int(rng.integers(3)) if rng.integers(3) == 0 else None for _ in ps]
        stops, want = [], []
        for p, n, kw in zip(ps, maxn, kws):
            text = ref.generate(p, max_new_tokens=n, **kw).text
            j = int(rng.integers(0, max(1, len(text) - 2)))
            stops.append([text[j:j + 2]] if rng.integers(2) and len(text) > 3 else [])
            want.append(ref.generate(p, max_new_tokens=n, stop=stops[-1], **kw).tokens)
        need = max(-(-(len(p) + n) // P) for p, n in zip(ps, maxn))
        eng = Engine(m, page_size=P, num_pages=need + int(rng.integers(0, 6)), prefix_caching=bool(rng.integers(2)),
                     max_batch=int(rng.integers(1, 6)))
        drafter = {"none": None, "ngram": "ngram", "pl": PromptLookup(k=int(rng.integers(1, 8)), min_ngram=1),
                   "self": f"draft:{files[name]}", "other": f"draft:{other}"}
        reqs = [eng.add(p, SamplingParams(**kw), n, st, top_logprobs=lp, speculative=drafter[s])
                for p, n, kw, st, lp, s in zip(ps, maxn, kws, stops, lps, specs)]
        for _ in range(2000):
            if not eng.busy:
                break
            eng.step()
        assert not eng.busy, f"trial {trial}: the engine stalled"
        for i, r in enumerate(reqs):
            if not kws[i] or specs[i] == "none":
                assert r.tokens == want[i], (trial, i)
            assert len(r.logprobs) == (0 if lps[i] is None else len(r.tokens))
        no_pages_held(eng)


def test_cancelled_and_abandoned_speculating_requests_give_every_page_back(files):
    """Requests cancelled mid-run (drafting with a draft model, some sharing a prefix) and a stream
    closed early: no page is left in the engine's cache or the draft model's; the engine goes on."""
    m = tffedu.engine.load(files["qwen3"], n_ctx=256)
    ps = repetitive(3)
    want = m.generate(ps[0], max_new_tokens=20).tokens
    eng = engine_of(m, page_size=4, num_pages=60)
    reqs = [eng.add(p, max_new_tokens=40, speculative=f"draft:{files['other']}") for p in ps + ps[:1]]
    for _ in range(5):
        eng.step()
    for r in reqs:
        eng.cancel(r)
    s = m.stream(ps[1], max_new_tokens=40, speculative=f"draft:{files['other']}")
    next(s)
    s.close()
    no_pages_held(eng)
    assert m.generate(ps[0], max_new_tokens=20, speculative=f"draft:{files['other']}").tokens == want
    no_pages_held(eng)


def test_a_call_waiting_on_a_stream_its_own_thread_parked_says_so(files, monkeypatch):
    """A notebook starts a stream, then calls generate before reading the stream to the end: the
    stream runs on inside generate's steps until it is parked, holding pages a sliding window let it
    outgrow (so it cannot be preempted), which generate's long prompt needs. Nothing but this thread
    could read the stream: an EngineError, not a hang; the stream itself then reads on to the end."""
    from tffedu.errors import EngineError
    m = tffedu.engine.load(files["mistral_w"], n_ctx=256)
    want = m.generate([5, 6, 7], max_new_tokens=60, ignore_eos=True).text
    eng = engine_of(m, page_size=2, num_pages=8)        # a window of 6: 4 pages a sequence at most
    monkeypatch.setattr(tffedu.engine, "STUCK_S", 0.2)
    s = m.stream([5, 6, 7], max_new_tokens=60, ignore_eos=True)
    got = [next(s) for _ in range(5)]
    with pytest.raises(EngineError, match="stream.* of this same thread"):
        m.generate(list(range(1, 13)), max_new_tokens=4, ignore_eos=True)   # its prompt needs 6 pages
    got.extend(s)
    assert "".join(got) == want
    no_pages_held(eng)
    # read by another thread meanwhile: the call waits for it, and both finish
    alone = m.generate(list(range(1, 13)), max_new_tokens=4, ignore_eos=True).tokens
    monkeypatch.setattr(tffedu.engine, "STUCK_S", 60.0)
    s = m.stream([5, 6, 7], max_new_tokens=60, ignore_eos=True)
    got = [next(s)]
    t = threading.Thread(target=lambda: got.extend(s), daemon=True)
    t.start()
    assert m.generate(list(range(1, 13)), max_new_tokens=4, ignore_eos=True).tokens == alone
    t.join(60)
    assert not t.is_alive() and "".join(got) == want
    no_pages_held(eng)
