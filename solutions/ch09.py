"""Chapter 09 (the paged KV cache): reference solutions. Pages are [num_pages, page_size, H, D]."""
import numpy as np

__all__ = ["slot_mapping", "gather_kv", "paged_decode_attention"]


def slot_mapping(page_table, positions, page_size):
    """Exercise 09.1 (easy): the flat slot (page * page_size + offset in the page) of each token
    position of a sequence whose pages are `page_table`."""
    positions = np.asarray(positions)
    return np.asarray(page_table)[positions // page_size] * page_size + positions % page_size


def gather_kv(pages, page_table, n_tokens):
    """Exercise 09.2 (medium): the first n_tokens K (or V) vectors of a sequence, contiguous
    [n_tokens, H, D], read through its page table."""
    ps = pages.shape[1]
    flat = pages.reshape(-1, *pages.shape[2:])
    return flat[slot_mapping(page_table, np.arange(n_tokens), ps)]


def paged_decode_attention(q, k_pages, v_pages, page_table, n_tokens):
    """Exercise 09.3 (hard): one decode step's attention for one sequence: q [Hq, D] against the
    sequence's n_tokens cached keys and values (all visible), GQA (query head h reads KV head
    h // (Hq / Hkv)), scale 1/sqrt(D). Returns [Hq, D]."""
    k = gather_kv(k_pages, page_table, n_tokens)            # [n, Hkv, D]
    v = gather_kv(v_pages, page_table, n_tokens)
    g = q.shape[0] // k.shape[1]
    k, v = np.repeat(k, g, 1), np.repeat(v, g, 1)           # [n, Hq, D]
    s = np.einsum("hd,nhd->hn", q, k) / np.sqrt(q.shape[-1])
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return np.einsum("hn,nhd->hd", p, v)
