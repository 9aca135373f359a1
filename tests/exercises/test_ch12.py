"""Chapter 12 exercises: merging online-softmax statistics (reference: torch.logsumexp) and flash
attention tile by tile (reference: torch's scaled_dot_product_attention), and on a GPU the
learner's one-pass row softmax kernel (reference: numpy in float64)."""
import numpy as np
import pytest
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


@pytest.mark.gpu
def test_ch12_3_softmax_rows_kernel(impl):
    from kernel_check import launch_file, to_gpu
    path = impl.softmax_rows_kernel()
    rng = np.random.default_rng(12)
    for rows, n in [(1, 7), (5, 32), (9, 1000), (3, 10_000)]:
        x = (rng.standard_normal((rows, n)) * 30).astype(np.float32)    # exp(x) alone would overflow
        y = to_gpu(np.full((rows, n), np.nan, np.float32))
        launch_file(path, "softmax_rows_ex", "PPii", (-(-rows // 4),), (128,), to_gpu(x), y, np.int32(rows), np.int32(n))
        e = np.exp(x.astype(np.float64) - x.max(-1, keepdims=True))
        np.testing.assert_allclose(y.get(), e / e.sum(-1, keepdims=True), rtol=1e-4, atol=1e-7, err_msg=f"{rows}x{n}")


def _sums_added():
    from solutions.ch12 import softmax_rows_kernel
    from kernel_check import with_mistake
    return with_mistake(softmax_rows_kernel(), "(s == 0.0f ? 0.0f : s * expf(m - mm)) + (so == 0.0f ? 0.0f : so * expf(mo - mm))",
                        "s + so")


WRONG = {"test_ch12_1_merge_softmax_stats": {"adds-sums": {"merge_softmax_stats": lambda m1, l1, m2, l2: (max(m1, m2), l1 + l2)}},
         "test_ch12_2_flash_attention": {"no-rescale": {"flash_attention": _no_rescale}},
         "test_ch12_3_softmax_rows_kernel": {"adds-sums": {"softmax_rows_kernel": _sums_added}}}
