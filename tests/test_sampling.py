"""Sampling (tffedu.sampling) against HF transformers' logits processors and warpers.

For each filter (and for the whole chain, in HF's order: repetition penalty, temperature, top-k,
top-p, min-p) the set of tokens left with a finite score must equal HF's on random logits; draws
must follow the softmax of HF's processed logits; bad values are SamplingErrors raised before any
work (a generator is not advanced).
"""
import numpy as np
import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from transformers import (MinPLogitsWarper, RepetitionPenaltyLogitsProcessor, TemperatureLogitsWarper,
                          TopKLogitsWarper, TopPLogitsWarper)

from tffedu.errors import SamplingError
from tffedu.sampling import (SamplingParams, apply_repetition_penalty, min_p_mask, process_logits, sample,
                             top_k_mask, top_p_mask)

logit_rows = arrays(np.float64, st.integers(1, 64), elements=st.floats(-20, 20, allow_nan=False))
distinct_rows = st.builds(lambda n, s, seed: np.random.default_rng(seed).standard_normal(n) * s,
                          st.integers(1, 300), st.floats(0.1, 8), st.integers(0, 2**32 - 1))


def hf(warper, x, ids=None):
    ids = torch.zeros((1, 0), dtype=torch.long) if ids is None else torch.as_tensor(ids, dtype=torch.long)[None]
    return warper(ids, torch.from_numpy(np.array(x, np.float64))[None])[0].numpy()


def hf_chain(x, p: SamplingParams, ctx):
    t = hf(RepetitionPenaltyLogitsProcessor(p.repetition_penalty), x, ctx)
    t = hf(TemperatureLogitsWarper(p.temperature), t)
    if p.top_k:
        t = hf(TopKLogitsWarper(p.top_k), t)
    if p.top_p < 1:
        t = hf(TopPLogitsWarper(p.top_p), t)
    if p.min_p:
        t = hf(MinPLogitsWarper(p.min_p), t)
    return t


@settings(max_examples=150, deadline=None)
@given(x=logit_rows, k=st.integers(1, 80))
def test_top_k_matches_hf_with_ties(x, k):
    "Rounded logits have many ties: tokens tied with the k-th are kept, as in HF."
    x = np.round(x)
    assert np.array_equal(top_k_mask(x, k), np.isfinite(hf(TopKLogitsWarper(k), x)))


@settings(max_examples=150, deadline=None)
@given(x=distinct_rows, p=st.floats(0.01, 1.0, exclude_max=True))
def test_top_p_matches_hf(x, p):
    assert np.array_equal(top_p_mask(x, p), np.isfinite(hf(TopPLogitsWarper(p), x)))


@settings(max_examples=150, deadline=None)
@given(x=distinct_rows, m=st.floats(0.0, 1.0, exclude_min=True))
def test_min_p_matches_hf(x, m):
    assert np.array_equal(min_p_mask(x, m), np.isfinite(hf(MinPLogitsWarper(m), x)))


@settings(max_examples=100, deadline=None)
@given(x=logit_rows, pen=st.floats(0.1, 5), data=st.data())
def test_repetition_penalty_matches_hf(x, pen, data):
    ctx = data.draw(st.lists(st.integers(0, len(x) + 3), max_size=30))  # repeats, and ids past V
    ours = apply_repetition_penalty(x, ctx, pen)
    theirs = hf(RepetitionPenaltyLogitsProcessor(pen), x, ctx)
    np.testing.assert_allclose(ours, theirs, rtol=1e-12)


@settings(max_examples=200, deadline=None)
@given(x=distinct_rows, temp=st.floats(0.05, 3), k=st.integers(0, 50), p=st.floats(0.05, 1.0),
       m=st.floats(0, 0.5), pen=st.floats(1.0, 3.0), data=st.data())
def test_whole_chain_matches_hf(x, temp, k, p, m, pen, data):
    ctx = data.draw(st.lists(st.integers(0, len(x) - 1), max_size=20))
    params = SamplingParams(temperature=temp, top_k=k, top_p=p, min_p=m, repetition_penalty=pen)
    ours = process_logits(x, params, ctx)
    theirs = hf_chain(x, params, ctx)
    assert np.array_equal(np.isfinite(ours), np.isfinite(theirs))
    kept = np.isfinite(ours)
    np.testing.assert_allclose(ours[kept], theirs[kept], rtol=1e-12)


def test_draws_follow_hf_distribution():
    "12 000 seeded draws vs the softmax of HF's processed logits (chi-square at p = 1e-4)."
    rng = np.random.default_rng(5)
    x = rng.standard_normal(20) * 2
    params = SamplingParams(temperature=0.8, top_k=12, top_p=0.95, min_p=0.02, repetition_penalty=1.3, seed=3)
    ctx = [1, 2, 3, 3]
    probs = torch.softmax(torch.from_numpy(hf_chain(x, params, ctx)), -1).numpy()
    n = 12_000
    g = params.make_rng()
    draws = sample(np.tile(x, (n, 1)), params, [g] * n, [ctx] * n)
    counts = np.bincount(draws, minlength=20)
    assert counts[probs == 0].sum() == 0, "a filtered-out token was drawn"
    keep = probs > 0
    expected = probs[keep] * n
    chi2 = float(((counts[keep] - expected) ** 2 / expected).sum())
    pvalue = torch.special.gammaincc(torch.tensor((keep.sum() - 1) / 2.0), torch.tensor(chi2 / 2)).item()
    assert pvalue > 1e-4, f"chi-square {chi2:.1f} with {keep.sum() - 1} dof: p = {pvalue:.2e}"


def test_greedy_is_argmax_after_penalty():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 100)).astype(np.float32)
    assert sample(x, SamplingParams()).tolist() == np.argmax(x, -1).tolist()
    top = int(np.argmax(x[0]))
    p = SamplingParams(repetition_penalty=50.0)
    expected = int(np.argmax(hf(RepetitionPenaltyLogitsProcessor(50.0), x[0], [top])))
    assert sample(x[0], p, context=[top]) == expected != top


def test_seeded_and_batch_independent():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 1000))
    p = SamplingParams(temperature=1.5, seed=1234)
    alone = [sample(x[1], p, g) for g in [p.make_rng()] for _ in range(5)]
    assert alone == [sample(x[1], p, g) for g in [p.make_rng()] for _ in range(5)]
    g0, g1, g2 = np.random.default_rng(9), p.make_rng(), np.random.default_rng(10)
    batched = [sample(x, [SamplingParams(temperature=1.0), p, SamplingParams()], [g0, g1, g2])[1]
               for _ in range(5)]
    assert batched == alone


@pytest.mark.parametrize("bad", [dict(temperature=-0.1), dict(temperature=float("inf")),
                                 dict(temperature=float("nan")), dict(temperature="1"),
                                 dict(top_k=-1), dict(top_k=1.5), dict(top_k=True),
                                 dict(top_p=0.0), dict(top_p=1.01), dict(min_p=-0.01), dict(min_p=2),
                                 dict(repetition_penalty=0), dict(repetition_penalty=-1),
                                 dict(seed=-1), dict(seed=1.5)])
def test_invalid_params(bad):
    with pytest.raises(SamplingError, match=next(iter(bad))):
        SamplingParams(**bad)


def test_valid_params():
    SamplingParams(temperature=0.7, top_k=np.int64(5), top_p=1.0, min_p=1.0, repetition_penalty=1.2,
                   seed=np.int32(3))


def test_errors_before_any_work():
    x = np.random.default_rng(0).standard_normal((2, 10))
    p = SamplingParams(temperature=1.0)
    g = np.random.default_rng(0)
    state = g.bit_generator.state
    bad_calls = [
        lambda: sample(x, p, [g, None]),  # row 1 samples but has no generator
        lambda: sample(x, [p], [g, g]),  # one params for two rows
        lambda: sample(x, p, [g]),
        lambda: sample(np.where(np.arange(10) == 3, np.nan, x), p, g),
        lambda: sample(np.full((2, 10), -np.inf), p, g),
        lambda: sample(np.inf * np.ones(10), p, g),
        lambda: sample(np.zeros((2, 0)), p, g),
        lambda: sample(np.zeros((2, 3, 4)), p, g),
        lambda: sample(np.arange(10), p, g),  # integer logits
        lambda: sample(x, p, g, context=[[1], [-2]]),
        lambda: sample(x, p, g, context=[1, 2]),  # one list per row is needed for [B, V]
        lambda: sample(x[0], p, g, context=[1.5]),
        lambda: sample(x, dict(temperature=1.0), g),
    ]
    for call in bad_calls:
        with pytest.raises(SamplingError):
            call()
    assert g.bit_generator.state == state, "a failed call advanced the generator"


def test_masked_tokens_never_drawn():
    x = np.full(50, -np.inf)
    x[[3, 17]] = [0.0, 0.1]
    p = SamplingParams(temperature=2.0, seed=0)
    g = p.make_rng()
    assert set(sample(np.tile(x, (500, 1)), p, [g] * 500).tolist()) <= {3, 17}


@pytest.mark.parametrize("x, ctx, pen, safe", [
    ([1.0, 2.0, -1.0, 0.5], [0, 1, 2], 5e-324, 1e-300),   # 1 / 5e-324 and 2 / 5e-324 are +inf
    ([-3.0, -2.0, -5.0], [0, 1, 2], 1e308, 1e300),        # -2 * 1e308 is -inf: every token is
])
def test_a_penalty_that_overflows_takes_its_limit(x, ctx, pen, safe):
    """A penalty so extreme that float64 overflows draws what a slightly milder one, which does not
    overflow, draws with probability 1: the likeliest of the repeated tokens (here token 1 both times),
    not the last finite token nor an IndexError."""
    assert np.isfinite(apply_repetition_penalty(x, ctx, safe)).all()
    for t in (0.0, 1.0, 1e-3):
        draws = [[sample(np.array(x), SamplingParams(temperature=t, repetition_penalty=r), g, context=ctx)
                  for g in [np.random.default_rng(0)] for _ in range(20)] for r in (safe, pen)]
        assert draws[0] == draws[1] == [1] * 20, (t, draws)
