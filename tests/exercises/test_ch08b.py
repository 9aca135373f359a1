"""Chapter 08b exercises: top-k log-probabilities and perplexity. Reference: torch (log_softmax,
topk, cross_entropy)."""
import numpy as np
import torch


def test_ch08b_1_top_k_logprobs(impl):
    z = np.random.default_rng(0).standard_normal(1000).astype(np.float32) * 4
    ids, lp = impl.top_k_logprobs(z, 5)
    ref = torch.log_softmax(torch.from_numpy(z).double(), -1).topk(5)
    assert list(np.asarray(ids)) == ref.indices.tolist()
    np.testing.assert_allclose(lp, ref.values.numpy(), rtol=1e-9)


def test_ch08b_2_perplexity(impl):
    rng = np.random.default_rng(1)
    logits = rng.standard_normal((12, 50)).astype(np.float32) * 3
    ids = rng.integers(0, 50, 12)
    ref = torch.exp(torch.nn.functional.cross_entropy(torch.from_numpy(logits[:-1]).double(),
                                                      torch.from_numpy(ids[1:]))).item()
    assert abs(impl.perplexity(logits, ids) - ref) < 1e-9 * ref


WRONG = {"test_ch08b_2_perplexity": {"off-by-one": {"perplexity": lambda logits, ids: float(np.exp(np.mean(
    np.log(np.exp(logits).sum(-1)) - logits[np.arange(len(ids)), ids])))}}}
