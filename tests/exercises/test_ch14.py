"""Chapter 14 exercises: top-k, top-p and the repetition penalty. Reference: HF transformers' own
TopKLogitsWarper, TopPLogitsWarper and RepetitionPenaltyLogitsProcessor."""
import numpy as np
import torch
from transformers.generation.logits_process import (RepetitionPenaltyLogitsProcessor,
                                                    TopKLogitsWarper, TopPLogitsWarper)

rng = np.random.default_rng(0)


def rows(n=20, V=300, ties=True):
    for _ in range(n):
        z = (rng.standard_normal(V) * rng.choice([0.5, 3, 10])).astype(np.float32)
        if ties:
            z[rng.integers(0, V, 5)] = z.max()                 # ties at the top
        yield z


def hf(proc, z, ids=None):
    ids = torch.zeros((1, 1), dtype=torch.long) if ids is None else torch.tensor([ids])
    return proc(ids, torch.from_numpy(z)[None].clone())[0].numpy()


def test_ch14_1_top_k_filter(impl):
    for z in rows():
        for k in (1, 5, 50):
            np.testing.assert_array_equal(impl.top_k_filter(z, k), hf(TopKLogitsWarper(k), z))


def test_ch14_2_top_p_filter(impl):
    for z in rows(ties=False):           # (with ties at the boundary, which one goes is torch's sort order)
        for p in (0.1, 0.5, 0.9, 0.99):
            np.testing.assert_array_equal(impl.top_p_filter(z, p), hf(TopPLogitsWarper(p), z))


def test_ch14_3_repetition_penalty(impl):
    for z in rows():
        ids = list(rng.integers(0, len(z), 12))
        np.testing.assert_allclose(impl.repetition_penalty(z, ids, 1.3),
                                   hf(RepetitionPenaltyLogitsProcessor(1.3), z, ids), rtol=1e-6)


def _top_p_strict(z, p, min_keep=1):             # stops before the token that crosses p
    z = np.asarray(z, np.float32).copy()
    order = np.argsort(-z, kind="stable")
    e = np.exp(z[order] - z.max())
    cum = np.cumsum(e / e.sum())
    keep = np.searchsorted(cum, p)
    z[order[max(keep, min_keep):]] = -np.inf
    return z


WRONG = {"test_ch14_1_top_k_filter": {"exactly-k": {"top_k_filter": lambda z, k: np.where(
             np.isin(np.arange(len(z)), np.argsort(-z, kind="stable")[:k]), z, -np.inf).astype(np.float32)}},
         "test_ch14_2_top_p_filter": {"from-the-top": {"top_p_filter": _top_p_strict}},
         "test_ch14_3_repetition_penalty": {"always-divide": {"repetition_penalty": lambda z, ids, pen: np.where(
             np.isin(np.arange(len(z)), ids), z / pen, z).astype(np.float32)}}}
