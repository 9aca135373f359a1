"""Chapter 12 exercises: merging online-softmax statistics (reference: torch.logsumexp) and flash
attention tile by tile (reference: torch's scaled_dot_product_attention)."""
import numpy as np
import torch

rng = np.random.default_rng(0)


def test_ch12_1_merge_softmax_stats(impl):
    for _ in range(20):
        a, b = rng.standard_normal(17) * 30, rng.standard_normal(9) * 30
        m1, m2 = a.max(), b.max()
        m, l = impl.merge_softmax_stats(m1, np.exp(a - m1).sum(), m2, np.exp(b - m2).sum())
        ref = torch.logsumexp(torch.from_numpy(np.r_[a, b]), 0).item()
        assert abs(m + np.log(l) - ref) < 1e-9 * max(1, abs(ref))


def test_ch12_2_flash_attention(impl):
    for T, S, D, bq, bk in [(37, 37, 16, 16, 16), (8, 50, 8, 4, 16), (64, 64, 32, 32, 8)]:
        q, k, v = (rng.standard_normal((n, D)).astype(np.float32) for n in (T, S, S))
        mask = torch.ones(T, S, dtype=torch.bool).tril(S - T)               # bottom-right causal
        ref = torch.nn.functional.scaled_dot_product_attention(
            *(torch.from_numpy(a).double()[None] for a in (q, k, v)), attn_mask=mask[None])[0].numpy()
        np.testing.assert_allclose(impl.flash_attention(q, k, v, bq, bk, causal=True), ref, rtol=1e-6, atol=1e-8)


def _no_rescale(q, k, v, block_q=16, block_k=16, causal=True):   # forgets to rescale by the new max
    T, D = q.shape
    S = k.shape[0]
    out = np.zeros((T, D))
    for i in range(0, T, block_q):
        qi = q[i:i + block_q].astype(np.float64)
        l, acc = np.zeros(len(qi)), np.zeros((len(qi), D))
        for j in range(0, S, block_k):
            s = qi @ k[j:j + block_k].T / np.sqrt(D)
            rows = np.arange(i, i + len(qi))[:, None] + S - T
            s = np.where(np.arange(j, j + s.shape[1])[None] <= rows, s, -np.inf)
            p = np.exp(s - np.nanmax(np.where(np.isfinite(s), s, np.nan), 1, keepdims=True))
            p = np.nan_to_num(p)
            l += p.sum(1)
            acc += p @ v[j:j + block_k]
        out[i:i + block_q] = acc / l[:, None]
    return out


WRONG = {"test_ch12_1_merge_softmax_stats": {"adds-sums": {"merge_softmax_stats": lambda m1, l1, m2, l2: (max(m1, m2), l1 + l2)}},
         "test_ch12_2_flash_attention": {"no-rescale": {"flash_attention": _no_rescale}}}
