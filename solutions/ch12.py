"""Chapter 12 (attention on the GPU): reference solutions, numpy models of the tiled kernels."""
import numpy as np

from solutions import kernel_file

__all__ = ["merge_softmax_stats", "flash_attention", "softmax_rows_kernel"]


def merge_softmax_stats(m1, l1, m2, l2):
    """Exercise 12.1 (easy): online softmax. (m, l) summarizes a block of scores: m its maximum,
    l = sum(exp(s - m)). Return (m, l) of the two blocks together without seeing the scores."""
    m = np.maximum(m1, m2)
    return m, l1 * np.exp(m1 - m) + l2 * np.exp(m2 - m)


def flash_attention(q, k, v, block_q=16, block_k=16, causal=True):
    """Exercise 12.2 (hard): attention of q [T, D] over k, v [S, D] (one head, scale 1/sqrt(D);
    causal: query t sees keys <= t + S - T) computed block by block with the online softmax — never
    the whole [T, S] score matrix: for each block of queries keep a running max, sum and output,
    rescaled at every block of keys."""
    T, D = q.shape
    S = k.shape[0]
    out = np.zeros((T, D))
    for i in range(0, T, block_q):
        qi = q[i:i + block_q].astype(np.float64)
        m = np.full(len(qi), -np.inf)
        l = np.zeros(len(qi))
        acc = np.zeros((len(qi), D))
        for j in range(0, S, block_k):
            s = qi @ k[j:j + block_k].T / np.sqrt(D)
            if causal:
                rows = np.arange(i, i + len(qi))[:, None] + S - T
                s = np.where(np.arange(j, j + s.shape[1])[None] <= rows, s, -np.inf)
            m_new = np.maximum(m, s.max(1))
            scale = np.where(np.isfinite(m), np.exp(m - m_new), 0.0)
            p = np.where(np.isfinite(s), np.exp(s - m_new[:, None]), 0.0)
            l = l * scale + p.sum(1)
            acc = acc * scale[:, None] + p @ v[j:j + block_k]
            m = m_new
        out[i:i + block_q] = acc / l[:, None]
    return out


def softmax_rows_kernel():
    """Exercise 12.3 (medium, GPU): finish `softmax_rows_ex` in exercises/kernels/softmax_rows.cu: merge
    the lanes' online-softmax (max, sum) pairs with shuffles, then write the row's softmax. Returns
    the path of your kernel file, which the check compiles and runs on the GPU (against numpy, on
    rows up to 1e4 in size)."""
    return kernel_file("softmax_rows.cu")
