"""Speculative decoding (chapter 16): with drafts, greedy output is token for token the output
without them (CPU and GPU, batch 1 and batched, prompt lookup and a draft model), sampled output
has the model's distribution (chi-square against the exact distribution, enumerated from the
model's logits), the K/V of rejected drafts leave the cache, and bad settings are named."""
import numpy as np
import pytest
import torch

import tffedu.engine
from tffedu.engine import Engine
from tffedu.errors import SpeculativeError, TffeduError
from tffedu.sampling import SamplingParams, _softmax, process_logits
from tffedu.speculative import (DraftModel, Drafter, MAX_DRAFT, PromptLookup, accept_greedy, accept_sampled,
                                expected_tokens)
from hf_models import tiny_llama, tiny_mistral, tiny_qwen3, write_gguf


def chi2_pvalue(counts, probs) -> float:
    "Pearson's goodness of fit of counts to probs (cells expected < 5 merged into one)."
    counts, probs = np.asarray(counts, float), np.asarray(probs, float)
    exp = probs / probs.sum() * counts.sum()
    small = exp < 5
    if small.any():
        counts = np.append(counts[~small], counts[small].sum())
        exp = np.append(exp[~small], exp[small].sum())
    stat, df = float(((counts - exp) ** 2 / exp).sum()), len(exp) - 1
    return float(torch.special.gammaincc(torch.tensor(df / 2, dtype=torch.float64),
                                         torch.tensor(stat / 2, dtype=torch.float64)))


# ---- the acceptance rule on its own -------------------------------------------------------------

def test_greedy_acceptance_keeps_the_agreeing_prefix_and_one_more():
    assert accept_greedy([5, 6, 7], [5, 6, 7, 8]) == [5, 6, 7, 8]      # all kept, plus the bonus
    assert accept_greedy([5, 6, 7], [5, 9, 7, 8]) == [5, 9]            # the model's token replaces 6
    assert accept_greedy([5], [4, 1]) == [4]
    assert accept_greedy([], [3]) == [3]


@pytest.mark.parametrize("deterministic", [True, False])
def test_rejection_sampling_keeps_the_target_distribution(deterministic):
    """Drafts from q (or fixed ones), accepted by Leviathan et al.'s rule: the first token is
    distributed as p_0, and the second (when the first draft is kept) as p_1."""
    rng = np.random.default_rng(7)
    V, k, n = 6, 2, 40_000
    p = rng.dirichlet(np.ones(V), size=k + 1)
    q = rng.dirichlet(np.ones(V) * 0.5, size=k)
    first, second = np.zeros(V), np.zeros(V)
    for _ in range(n):
        drafts = ([int(rng.integers(V)) for _ in range(k)] if deterministic
                  else [int(rng.choice(V, p=q[i])) for i in range(k)])
        out = accept_sampled(drafts, p, None if deterministic else q, rng)
        assert 1 <= len(out) <= k + 1
        first[out[0]] += 1
        if len(out) > 1:
            second[out[1]] += 1
    assert chi2_pvalue(first, p[0]) > 1e-3
    assert chi2_pvalue(second, p[1]) > 1e-3


def test_expected_tokens_per_step():
    assert expected_tokens(0.0, 4) == 1.0
    assert expected_tokens(1.0, 4) == 5.0
    assert abs(expected_tokens(0.5, 3) - (1 + 0.5 + 0.25 + 0.125)) < 1e-12


def test_prompt_lookup_proposes_what_followed_the_latest_match():
    d = PromptLookup(k=3, max_ngram=3, min_ngram=1)
    assert d.draft([1, 2, 3, 4, 9, 2, 3], 3) == [4, 9, 2]          # "2 3" was followed by 4 9 2
    assert d.draft([1, 2, 3, 1, 2, 5, 1, 2], 3) == [5, 1, 2]        # the latest "1 2" wins
    assert d.draft([1, 2, 3], 3) == []                              # nothing repeats
    assert PromptLookup(min_ngram=2).draft([7, 1, 8, 1], 4) == []   # a 1-gram is not enough


# ---- the engine: greedy is exact ----------------------------------------------------------------

@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("spec")
    return {"qwen3": write_gguf(tiny_qwen3(hidden=64, heads=4, kv_heads=2, seed=5, std=0.08), d / "q.gguf", "F32"),
            "llama_q8": write_gguf(tiny_llama(hidden=128, heads=8, kv_heads=2, tied=False, seed=6), d / "l.gguf", "Q8_0"),
            # a sliding window shorter than the drafts: rejected drafts near pages the window gave back
            "mistral_w": write_gguf(tiny_mistral(hidden=64, heads=4, kv_heads=2, seed=7, window=6), d / "w.gguf", "F32"),
            # another model of the same vocabulary: a draft the target mostly disagrees with
            "other": write_gguf(tiny_qwen3(hidden=32, heads=2, kv_heads=1, seed=9, std=0.08), d / "o.gguf", "F32")}


def prompts(seed=0):
    "Prompts that repeat themselves (prompt lookup finds matches) and one that does not."
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 400, 12).tolist()
    return [base * 4, base[:5] * 6 + base, rng.integers(0, 400, 30).tolist()]


def check_exact(m, spec, n=40):
    plain = [m.generate(p, max_new_tokens=n).tokens for p in prompts()]
    eng = tffedu.engine.engine_of(m)
    before = dict(eng.stats)
    alone = [m.generate(p, max_new_tokens=n, speculative=spec).tokens for p in prompts()]
    batched = [g.tokens for g in m.generate_batch(prompts(), max_new_tokens=n, speculative=spec)]
    assert alone == plain
    assert batched == plain
    assert eng.stats["verify_steps"] > before["verify_steps"]      # drafts were checked
    assert eng.cache.n_free_pages == eng.cache.num_pages           # nothing left behind
    for d in eng.drafters.values():                                # nor in a draft model's cache
        if isinstance(d, DraftModel):
            assert d.cache.n_free_pages == d.cache.num_pages
    return eng.stats["accepted"] - before["accepted"], eng.stats["drafted"] - before["drafted"]


@pytest.mark.parametrize("name", ["qwen3", "llama_q8", "mistral_w"])
def test_prompt_lookup_is_exact(files, name):
    m = tffedu.engine.load(files[name], n_ctx=256)
    check_exact(m, "ngram")
    check_exact(m, PromptLookup(k=5, min_ngram=1))


def test_a_draft_model_is_exact(files):
    m = tffedu.engine.load(files["qwen3"], n_ctx=256)
    acc, drafted = check_exact(m, f"draft:{files['qwen3']}")     # itself: every draft is kept
    assert acc == drafted > 0
    acc, drafted = check_exact(m, f"draft:{files['other']}")     # another: most are rejected
    assert acc < drafted


def test_a_draft_model_trained_for_less_context_keeps_its_own(files, tmp_path):
    "A target of 512 tokens drafted by a model trained for 256: the draft loads with its 256, and stays exact."
    from tffedu.speculative import make_drafter
    long = write_gguf(tiny_qwen3(hidden=64, heads=4, kv_heads=2, seed=5, std=0.08, ctx=512), tmp_path / "l.gguf", "F32")
    m = tffedu.engine.load(long, n_ctx=512)
    d = make_drafter(f"draft:{files['other']}", m, page_size=8, num_pages=64)
    assert (d.model.n_ctx, m.n_ctx) == (256, 512)
    check_exact(m, f"draft:{files['other']}")


def test_speculating_and_plain_requests_share_steps(files):
    "One engine, requests with and without drafts in the same steps, each as if it ran alone."
    m = tffedu.engine.load(files["qwen3"], n_ctx=256)
    ps = prompts(1) * 2
    want = [m.generate(p, max_new_tokens=30).tokens for p in ps]
    eng = Engine(m, page_size=8, num_pages=200)
    reqs = [eng.add(p, max_new_tokens=30, speculative="ngram" if i % 2 else None) for i, p in enumerate(ps)]
    kinds = set()
    while eng.busy:
        eng.step()
        kinds.add(eng.history[-1][0])
    assert [r.tokens for r in reqs] == want
    assert "verify" in kinds
    assert eng.cache.n_free_pages == eng.cache.num_pages


def test_a_step_keeps_within_the_runners_verify_rows(files):
    """A runner that takes a few rows per step with one row's numbers (on the GPU: Q8_0's GEMV, 4
    rows) gets no more from the drafts: prompt lookup would propose up to 16 per request."""
    m = tffedu.engine.load(files["qwen3"], n_ctx=256)
    want = [m.generate(p, max_new_tokens=30).tokens for p in prompts()]
    eng = Engine(m, page_size=8, num_pages=200)
    eng.runner.verify_rows = 4
    reqs = [eng.add(p, max_new_tokens=30, speculative="ngram") for p in prompts()]
    rows = []
    while eng.busy:
        eng.step()
        if eng.history[-1][0] == "verify":
            rows.append(sum(eng.history[-1][2]))
    assert [r.tokens for r in reqs] == want
    assert rows and max(rows) == 4                     # full steps, never more


def test_stops_streams_and_logprobs_are_unchanged(files):
    m = tffedu.engine.load(files["qwen3"], n_ctx=256)
    p = prompts()[0]
    plain = m.generate(p, max_new_tokens=30)
    text = m.decode(plain.tokens)
    stop = text[len(text) // 2: len(text) // 2 + 3]
    for kw in ({}, {"stop": [stop]}, {"max_new_tokens": 7}, {"ignore_eos": True}):
        kw = {"max_new_tokens": 30, **kw}
        assert m.generate(p, speculative="ngram", **kw).tokens == m.generate(p, **kw).tokens
    assert "".join(m.stream(p, max_new_tokens=30, speculative="ngram")) == plain.text
    eng = Engine(m, num_pages=100, page_size=16)
    a = eng.add(p, max_new_tokens=20, top_logprobs=2)
    b = eng.add(p, max_new_tokens=20, top_logprobs=2, speculative=PromptLookup(min_ngram=1))
    eng.run()
    assert a.tokens == b.tokens and b.n_accepted > 0
    for (la, ta), (lb, tb) in zip(a.logprobs, b.logprobs):
        assert abs(la - lb) < 1e-4 and [t for t, _ in ta] == [t for t, _ in tb]


def test_rejected_drafts_leave_the_cache_and_its_prefix_pages_true(files):
    """Pages published for prefix sharing after speculation hold the accepted tokens only: a
    later request that reuses them gets the logits of a fresh prefill."""
    m = tffedu.engine.load(files["qwen3"], n_ctx=256)
    eng = Engine(m, page_size=4, num_pages=64)
    p = prompts()[1]
    r = eng.add(p, max_new_tokens=40, speculative=PromptLookup(k=6, min_ngram=1))
    eng.run()
    assert r.n_drafted > r.n_accepted > 0                   # some drafts were rejected
    again = eng.add(r.ids, max_new_tokens=1)
    eng.run()
    assert again.n_cached >= len(r.ids) - 4                  # its full pages were found
    assert again.tokens == m.generate(r.ids, max_new_tokens=1).tokens


# ---- sampling keeps the distribution -------------------------------------------------------------

class Guess(Drafter):
    "Drafts tokens at random from a few candidates, whatever the model thinks (a poor drafter)."

    def __init__(self, candidates, seed=0):
        super().__init__(2)
        self.candidates, self.rng = list(candidates), np.random.default_rng(seed)

    def propose(self, reqs):
        for r in reqs:
            r.drafts = [int(self.rng.choice(self.candidates)) for _ in range(r.k)]


def test_sampled_tokens_keep_the_model_distribution(files):
    """3 tokens per request, temperature 1.3 and top_k 3 (27 outcomes): counts of speculative runs
    against the exact distribution, enumerated from the model's logits."""
    m = tffedu.engine.load(files["qwen3"], n_ctx=64)
    prompt = prompts()[2][:8]
    params = dict(temperature=1.3, top_k=3)

    def dist(ctx):
        x = process_logits(m.logits(ctx)[-1], SamplingParams(**params), ctx)
        return _softmax(x)
    exact = {}
    p1 = dist(prompt)
    for a in np.flatnonzero(p1):
        p2 = dist(prompt + [int(a)])
        for b in np.flatnonzero(p2):
            p3 = dist(prompt + [int(a), int(b)])
            for c in np.flatnonzero(p3):
                exact[(int(a), int(b), int(c))] = p1[a] * p2[b] * p3[c]
    cands = sorted({t for key in exact for t in key})
    n = 3000
    eng = Engine(m, page_size=8, num_pages=2048, max_batch=512, token_budget=8192)
    drafter = Guess(cands)
    reqs = [eng.add(prompt, SamplingParams(**params, seed=i), 3, ignore_eos=True, speculative=drafter)
            for i in range(n)]
    eng.run()
    assert eng.stats["verify_steps"] and 0 < eng.stats["accepted"] < eng.stats["drafted"]
    keys = list(exact)
    counts = [sum(tuple(r.tokens) == key for r in reqs) for key in keys]
    assert sum(counts) == n
    assert chi2_pvalue(counts, [exact[key] for key in keys]) > 1e-3


# ---- what cannot work is named ------------------------------------------------------------------

def test_bad_settings_are_named(files, tmp_path):
    m = tffedu.engine.load(files["qwen3"], n_ctx=256)
    for bad in ("bogus", "draft:", 3, ["ngram"]):
        with pytest.raises(SpeculativeError, match="speculative"):
            m.generate([1, 2, 3], max_new_tokens=2, speculative=bad)
    with pytest.raises(TffeduError):
        m.generate([1, 2, 3], max_new_tokens=2, speculative=f"draft:{tmp_path / 'none.gguf'}")
    other_vocab = write_gguf(tiny_qwen3(hidden=32, heads=2, kv_heads=1, seed=3, n_regular=300), tmp_path / "v.gguf", "F32",
                             n_regular=300)
    with pytest.raises(SpeculativeError, match="vocabulary"):
        m.generate([1, 2, 3], max_new_tokens=2, speculative=f"draft:{other_vocab}")
    for k in (0, MAX_DRAFT + 1, 2.0, True):
        with pytest.raises(SpeculativeError, match="k"):
            PromptLookup(k=k)
    with pytest.raises(SpeculativeError, match="min_ngram"):
        PromptLookup(max_ngram=2, min_ngram=3)
    assert m.generate([1, 2, 3], max_new_tokens=3).tokens == m.generate([1, 2, 3], max_new_tokens=3,
                                                                         speculative="ngram").tokens


# ---- the GPU ------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("name", ["qwen3", "llama_q8", "mistral_w"])
def test_speculation_is_exact_on_cuda(files, name):
    m = tffedu.engine.load(files[name], device="cuda", n_ctx=256)
    check_exact(m, "ngram")
    acc, drafted = check_exact(m, f"draft:{files[name]}")
    # the model drafting for itself: its catch-up step runs prefill kernels, whose rounding is not the
    # decode rows' that verify, so a near-tie may go the other way (2 of 174 drafts on an H100)
    assert drafted > 0 and acc >= 0.95 * drafted
    runner = tffedu.engine.engine_of(m).runner
    assert runner.stats["replayed"] > runner.stats["eager"]          # verify steps are decode steps: CUDA graphs


# ---- real weights, the command line, the server ---------------------------------------------------

@pytest.fixture(scope="module")
def smollm2():
    from tffedu.assets import default_model_path
    return tffedu.engine.load(default_model_path(quiet=True), n_ctx=1024)


def chat(m, text):
    return m.tokenizer.encode(m.tokenizer.apply_chat_template([{"role": "user", "content": text}]), special=True)


def test_real_weights_are_exact_and_accept_copies(smollm2):
    """SmolLM2-135M asked to copy its input: the same tokens with prompt lookup, and most drafts kept."""
    import json
    import pathlib
    tasks = json.loads((pathlib.Path(__file__).parents[1] / "benchmarks" / "spec_prompts.json").read_text())
    ids = [chat(smollm2, t["prompt"]) for t in tasks[:2]]
    plain = [smollm2.generate(p, max_new_tokens=48).tokens for p in ids]
    eng = tffedu.engine.engine_of(smollm2)
    before = dict(eng.stats)
    assert [g.tokens for g in smollm2.generate_batch(ids, max_new_tokens=48, speculative="ngram")] == plain
    assert [smollm2.generate(p, max_new_tokens=48, speculative="ngram").tokens for p in ids] == plain
    drafted, accepted = (eng.stats[k] - before[k] for k in ("drafted", "accepted"))
    assert accepted > 0.5 * drafted > 0


def test_the_command_line_takes_spec(tmp_path):
    import subprocess
    import sys
    run = lambda *a: subprocess.run([sys.executable, "-m", "tffedu.cli", "generate", "-p",   # noqa: E731
                                     "one two three, one two three, one two", "-n", "12", *a],
                                    capture_output=True, text=True, timeout=300)
    plain, spec = run(), run("--spec", "ngram")
    assert plain.returncode == spec.returncode == 0 and plain.stdout == spec.stdout
    for bad in ("bogus", "draft:"):
        r = run("--spec", bad)
        assert r.returncode == 2 and "--spec" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = run("--spec", f"draft:{tmp_path / 'missing.gguf'}")
    assert r.returncode == 1 and "missing.gguf" in r.stderr


def test_the_server_drafts_for_every_request(smollm2):
    pytest.importorskip("fastapi")
    httpx = pytest.importorskip("httpx")
    from tffedu.serve import ServerThread, make_app
    text = "Copy this list: apples, pears, plums, cherries, apples, pears, plums, cherries."
    want = smollm2.generate(chat(smollm2, text), max_new_tokens=24)
    want = smollm2.decode([t for t in want.tokens if t not in smollm2.eos_ids])
    with ServerThread(make_app(smollm2, max_batch=4, speculative="ngram")) as srv:
        r = httpx.post(srv.url + "/v1/chat/completions", timeout=120, json={
            "messages": [{"role": "user", "content": text}], "max_tokens": 24, "temperature": 0})
        assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == want
        metrics = httpx.get(srv.url + "/metrics").text
    drafted = [float(line.split()[-1]) for line in metrics.splitlines() if line.startswith("tffedu_spec_draft_tokens ")]
    assert drafted and drafted[0] > 0
    with pytest.raises(SpeculativeError):
        make_app(smollm2, speculative="sometimes")
