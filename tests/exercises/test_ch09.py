"""Chapter 09 exercises: slots, gathering through a page table, paged decode attention.
References: a contiguous cache written token by token, and torch's scaled_dot_product_attention."""
import numpy as np
import torch

rng = np.random.default_rng(0)


def setup(n_tokens=45, page_size=8, num_pages=16, H=2, D=4):
    table = rng.permutation(num_pages)[:-(-n_tokens // page_size)]
    pages = np.zeros((num_pages, page_size, H, D), np.float32)
    kv = rng.standard_normal((n_tokens, H, D)).astype(np.float32)
    for t in range(n_tokens):                         # write token by token, the obvious way
        pages[table[t // page_size], t % page_size] = kv[t]
    return table, pages, kv


def test_ch09_1_slot_mapping(impl):
    table, pages, kv = setup()
    flat = pages.reshape(-1, *pages.shape[2:])
    slots = np.asarray(impl.slot_mapping(table, np.arange(len(kv)), 8))
    np.testing.assert_array_equal(flat[slots], kv)


def test_ch09_2_gather_kv(impl):
    for n in (1, 8, 9, 45):
        table, pages, kv = setup(n_tokens=n)
        np.testing.assert_array_equal(np.asarray(impl.gather_kv(pages, table, n)), kv)


def test_ch09_3_paged_decode_attention(impl):
    table, kp, k = setup(n_tokens=37, H=2, D=16)
    _, vp, v = setup(n_tokens=37, H=2, D=16)
    vp[:] = 0
    for t in range(37):
        vp[table[t // 8], t % 8] = v[t]
    q = rng.standard_normal((6, 16)).astype(np.float32)
    t_ = lambda a: torch.from_numpy(a).transpose(0, 1)[None]         # [1, H, n, D]
    ref = torch.nn.functional.scaled_dot_product_attention(
        torch.from_numpy(q)[None, :, None], t_(k), t_(v), enable_gqa=True)[0, :, 0].numpy()
    np.testing.assert_allclose(impl.paged_decode_attention(q, kp, vp, table, 37), ref, rtol=1e-4, atol=1e-5)


WRONG = {"test_ch09_1_slot_mapping": {"ignores-table": {"slot_mapping": lambda table, pos, ps: np.asarray(pos)}},
         "test_ch09_2_gather_kv": {"page-order": {"gather_kv": lambda pages, table, n: pages[np.sort(table)].reshape(
             -1, *pages.shape[2:])[:n]}}}
