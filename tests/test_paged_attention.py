"""The numpy paged-attention ops (tffedu.kvcache, chapter 09) against torch's
scaled_dot_product_attention over contiguous K/V (float64), on random data."""
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tffedu.errors import ShapeError
from tffedu.factory import OPS
from tffedu.kvcache import KVCache, paged_attention, paged_attention_decode, paged_attention_varlen


def sdpa(q, k, v, positions, scale=None):
    "torch reference: q [T, Hq, D] over contiguous k, v [S, Hkv, D]; query i sees keys <= positions[i]."
    g = q.shape[1] // k.shape[1]
    qt = torch.from_numpy(q).double().transpose(0, 1)
    kt = torch.from_numpy(k).double().repeat_interleave(g, 1).transpose(0, 1)
    vt = torch.from_numpy(v).double().repeat_interleave(g, 1).transpose(0, 1)
    mask = torch.arange(len(k))[None, :] <= torch.as_tensor(np.asarray(positions))[:, None]
    o = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, attn_mask=mask, scale=scale)
    return o.transpose(0, 1).numpy()


def scattered_cache(rng, S, Hkv, D, P, extra_pages=5):
    "A cache holding one sequence of S random tokens' K/V, its pages shuffled over the pool."
    c = KVCache(1, Hkv, D, num_pages=-(-S // P) + extra_pages, page_size=P)
    for i in range(c.num_pages):  # scatter the free pages: occupy all, free in random order
        c.admit(("dummy", i), [i])
    for i in rng.permutation(c.num_pages):
        c.free(("dummy", int(i)))
    c.admit("s", range(S))
    k, v = rng.standard_normal((2, S, Hkv, D)).astype(np.float32)
    c.write("s", 0, 0, k, v)
    return c, k, v


def test_registered_for_cpu():
    assert OPS.get("paged_attention", "cpu") is paged_attention
    assert OPS.get("paged_attention_decode", "cpu") is paged_attention_decode


@pytest.mark.parametrize("P", [1, 3, 32, 100])  # 100 > the sequence
@pytest.mark.parametrize("Hq,Hkv", [(4, 4), (8, 2), (6, 1)])
def test_prefill_matches_contiguous(P, Hq, Hkv):
    rng = np.random.default_rng(P * 100 + Hq)
    S, D = 45, 16
    c, k, v = scattered_cache(rng, S, Hkv, D, P)
    for T in (1, 7, S):
        q = rng.standard_normal((T, Hq, D)).astype(np.float32)
        got = paged_attention(q, c.k[0], c.v[0], c.page_table("s"), S)
        np.testing.assert_allclose(got, sdpa(q, k, v, np.arange(S - T, S)), atol=2e-5)


@settings(max_examples=60, deadline=None)
@given(P=st.integers(1, 40), S=st.integers(1, 70), T=st.integers(1, 8),
       gqa=st.sampled_from([(2, 1), (4, 2), (3, 3)]), D=st.sampled_from([4, 8]),
       seed=st.integers(0, 2**32 - 1), data=st.data())
def test_random_positions_and_scale(P, S, T, gqa, D, seed, data):
    "Any query positions (not only the last T), any page size, any scale."
    rng = np.random.default_rng(seed)
    Hq, Hkv = gqa
    c, k, v = scattered_cache(rng, S, Hkv, D, P, extra_pages=2)
    pos = np.array(data.draw(st.lists(st.integers(0, S - 1), min_size=T, max_size=T)))
    scale = data.draw(st.sampled_from([None, 0.05, 1.0]))
    q = rng.standard_normal((T, Hq, D)).astype(np.float32)
    # one sequence of T rows at those positions, nothing new to store (slots -1)
    no_kv = np.zeros((T, Hkv, D), np.float32)
    got = paged_attention_varlen(q, no_kv, no_kv, c.k[0], c.v[0], np.full(T, -1, np.int32),
                                 c.page_table("s")[None], np.array([S], np.int32),
                                 np.array([0, T], np.int32), pos.astype(np.int32), scale=scale)
    np.testing.assert_allclose(got, sdpa(q, k, v, pos, scale), atol=2e-5)
    if T <= S:   # the last T positions: the single-sequence op
        last = np.arange(S - T, S)
        np.testing.assert_allclose(paged_attention(q, c.k[0], c.v[0], c.page_table("s"), S, scale=scale),
                                   sdpa(q, k, v, last, scale), atol=2e-5)


def test_decode_batch_with_shared_prefix_and_out():
    "Batched decode over padded page tables; two sequences share prefix pages."
    rng = np.random.default_rng(0)
    P, Hq, Hkv, D = 4, 8, 2, 8
    c = KVCache(1, Hkv, D, num_pages=40, page_size=P)
    prompts = {"a": list(range(13)), "b": list(range(8)) + [50, 51], "c": [7, 7, 7]}
    kv = {}
    for sid, toks in prompts.items():
        n = c.admit(sid, toks)
        k, v = rng.standard_normal((2, len(toks), Hkv, D)).astype(np.float32)
        if n:  # the cached prefix holds a's K/V for those positions
            k[:n], v[:n] = kv["a"][0][:n], kv["a"][1][:n]
        c.write(sid, 0, n, k[n:], v[n:])
        c.commit(sid, len(toks) - n, toks)
        kv[sid] = (k, v)
    assert c.n_computed("b") == 10 and c.page_table("b")[:2].tolist() == c.page_table("a")[:2].tolist()
    tables, lens = c.batch_tables(list(prompts))
    q = rng.standard_normal((3, Hq, D)).astype(np.float32)
    out = np.full_like(q, np.nan)
    got = paged_attention_decode(q, c.k[0], c.v[0], tables, lens, out=out)
    assert got is out
    for b, sid in enumerate(prompts):
        k, v = kv[sid]
        np.testing.assert_allclose(got[b], sdpa(q[b:b + 1], k, v, [len(k) - 1])[0], atol=2e-5)


def test_shape_errors():
    c = KVCache(1, 2, 8, num_pages=4, page_size=4)
    c.admit(0, range(6))
    with pytest.raises(ShapeError):  # Hq not a multiple of Hkv
        paged_attention(np.zeros((1, 3, 8), np.float32), c.k[0], c.v[0], c.page_table(0), 6)
    with pytest.raises(ShapeError):  # head_dim mismatch
        paged_attention(np.zeros((1, 4, 4), np.float32), c.k[0], c.v[0], c.page_table(0), 6)
    with pytest.raises(ShapeError):  # more queries than positions
        paged_attention(np.zeros((7, 4, 8), np.float32), c.k[0], c.v[0], c.page_table(0), 6)
    with pytest.raises(ShapeError):  # page table too short for seq_len
        paged_attention(np.zeros((1, 4, 8), np.float32), c.k[0], c.v[0], c.page_table(0)[:1], 6)
    with pytest.raises(ShapeError):
        paged_attention_decode(np.zeros((2, 4, 8), np.float32), c.k[0], c.v[0],
                               np.zeros((1, 2), np.int32), np.array([6], np.int32))


# ---- a two-layer toy transformer: paged cache + prefix hits + fork == full recompute ---------------
class Toy:
    "Random weights of a 2-layer attention-only model (GQA 4:2, position embeddings)."

    def __init__(self, seed, V=40, d=16, Hq=4, Hkv=2, D=8, L=2, n_pos=64):
        r = np.random.default_rng(seed)
        self.Hq, self.Hkv, self.D, self.L = Hq, Hkv, D, L
        self.emb, self.pos = r.standard_normal((V, d)), r.standard_normal((n_pos, d))
        self.wq, self.wo = r.standard_normal((L, d, Hq * D)) / 4, r.standard_normal((L, Hq * D, d)) / 4
        self.wk, self.wv = r.standard_normal((2, L, d, Hkv * D)) / 4

    def step(self, cache, sid, toks):
        "Compute the uncomputed tokens of sid (token ids `toks`) through the paged cache; the last hidden state."
        start = cache.n_computed(sid)
        T = len(toks) - start
        h = self.emb[toks[start:]] + self.pos[start:len(toks)]
        for l in range(self.L):
            q = (h @ self.wq[l]).reshape(T, self.Hq, self.D).astype(np.float32)
            k = (h @ self.wk[l]).reshape(T, self.Hkv, self.D)
            v = (h @ self.wv[l]).reshape(T, self.Hkv, self.D)
            cache.write(sid, l, start, k, v)
            a = paged_attention(q, cache.k[l], cache.v[l], cache.page_table(sid), len(toks))
            h = h + a.reshape(T, -1) @ self.wo[l]
        cache.commit(sid, T, toks)
        return h[-1]

    def full(self, toks):
        "torch, float64, the whole sequence recomputed with causal SDPA: the last hidden state."
        t = torch.from_numpy
        h = t(self.emb[toks] + self.pos[:len(toks)])
        g = self.Hq // self.Hkv
        for l in range(self.L):
            q = (h @ t(self.wq[l])).view(-1, self.Hq, self.D).transpose(0, 1)
            k = (h @ t(self.wk[l])).view(-1, self.Hkv, self.D).repeat_interleave(g, 1).transpose(0, 1)
            v = (h @ t(self.wv[l])).view(-1, self.Hkv, self.D).repeat_interleave(g, 1).transpose(0, 1)
            a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            h = h + a.transpose(0, 1).reshape(len(toks), -1) @ t(self.wo[l])
        return h[-1].numpy()


@pytest.mark.parametrize("P", [1, 3, 4, 64])  # 64: one page holds every sequence
def test_toy_model_paged_equals_full_recompute(P):
    model, rng = Toy(P), np.random.default_rng(P)
    c = KVCache(2, 2, 8, num_pages=200, page_size=P)
    system = rng.integers(0, 40, 9).tolist()
    prompts = {"a": system + [1, 2, 3], "b": system + [4, 5], "t1": system + list(range(6, 13)),
               "t2": system + list(range(6, 13))}
    seqs = {sid: list(p) for sid, p in prompts.items()}   # every sequence's tokens: ours, not the cache's
    c.admit("a", seqs["a"])
    model.step(c, "a", seqs["a"])
    for sid in ("b", "t1", "t2"):  # admitted in the same step: t1 and t2 are twins
        n_cached = c.admit(sid, prompts[sid])
        assert (n_cached > 0) == (P <= 9), "the shared system prompt should come from the prefix cache"
    for sid in ("t2", "t1", "b"):  # t2 first: it must not rely on pages t1 has not computed yet
        model.step(c, sid, seqs[sid])
    c.fork("b", "b2")
    seqs["b2"] = list(seqs["b"])
    for i in range(12):  # decode: every sequence one token per step; b and b2 diverge
        for sid in ("a", "b", "b2", "t1", "t2"):
            seqs[sid].append(int(rng.integers(0, 40)))
            c.extend(sid)
            out = model.step(c, sid, seqs[sid])
            if i % 3 == 2:  # the torch reference is the slow part: check every third step
                np.testing.assert_allclose(out, model.full(seqs[sid]), atol=1e-4)
        if i == 5:  # preempt a: its pages go to the prefix cache, the others must not notice
            tokens = seqs["a"]
            c.free("a")
            assert c.admit("a", tokens) > 0 or P > len(tokens) - 1
            np.testing.assert_allclose(model.step(c, "a", tokens), model.full(tokens), atol=1e-4)



@pytest.mark.parametrize("block", [1, 7, 256])
def test_query_blocks_give_the_same_attention(monkeypatch, block):
    "Rows in blocks of ATTN_BLOCK (issue 13: no [T, S] score matrix): the same as torch, any block size."
    import tffedu.kvcache as kvc
    monkeypatch.setattr(kvc, "ATTN_BLOCK", block)
    rng = np.random.default_rng(block)
    S, T, Hq, Hkv, D = 53, 20, 6, 2, 16
    c, k, v = scattered_cache(rng, S, Hkv, D, 8)
    q = rng.standard_normal((T, Hq, D)).astype(np.float32)
    got = paged_attention(q, c.k[0], c.v[0], c.page_table("s"), S)
    np.testing.assert_allclose(got, sdpa(q, k, v, np.arange(S - T, S)), rtol=1e-4, atol=1e-5)


def test_long_prefill_never_holds_the_score_matrix():
    "A 2048-token prefill (SmolLM2's 9/3 heads of 64): peak numpy memory far below one [Hq, T, S] f32 matrix."
    import tracemalloc
    rng = np.random.default_rng(0)
    S, Hq, Hkv, D = 2048, 9, 3, 64
    c, _, _ = scattered_cache(rng, S, Hkv, D, 32)
    q = rng.standard_normal((S, Hq, D)).astype(np.float32)
    full = Hq * S * S * 4                                  # 151 MB: one score matrix of the whole prompt
    tracemalloc.start()
    paged_attention(q, c.k[0], c.v[0], c.page_table("s"), S)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < full / 3, (peak, full)


def test_cu_seqlens_out_of_order_are_refused():
    """cu_seqlens that fall, start below 0 or end past the step's rows would make numpy slices wrap
    or come up short: a ShapeError naming them (the GPU kernels clamp them instead: they cannot
    read them back)."""
    from tffedu.errors import ShapeError
    from tffedu.kvcache import paged_attention_varlen
    from tests.test_op_contract import paged_batch
    args, _ = paged_batch(chunks=[5, 9], starts=[3, 20], Hq=4, Hkv=2, D=16, page_size=8)
    for bad in ([0, 10, 5], [-1, 5, 14], [0, 5, 15]):
        a = list(args)
        a[8] = np.array(bad, np.int32)
        with pytest.raises(ShapeError, match="cu_seqlens"):
            paged_attention_varlen(*a)
    paged_attention_varlen(*args)                             # the valid batch still runs


def test_a_page_table_naming_no_page_is_refused():
    """A page id where keys should be that is padding (-1) or past the pool: a KVCacheError naming it,
    not a wrapped-around read of the last page or an IndexError."""
    from tffedu.errors import KVCacheError
    rng = np.random.default_rng(5)
    c, k, v = scattered_cache(rng, 40, 2, 16, 16)
    q = rng.standard_normal((3, 4, 16)).astype(np.float32)
    table = c.page_table("s").copy()
    for bad in (-1, c.num_pages, 10**6):
        t = table.copy()
        t[1] = bad
        with pytest.raises(KVCacheError, match=f"entry {bad} "):
            paged_attention(q, c.k[0], c.v[0], t, 40)
        with pytest.raises(KVCacheError, match=f"entry {bad} "):
            paged_attention_decode(q[:1], c.k[0], c.v[0], t[None], np.array([40], np.int32))
    t = np.concatenate([table, [-1, -1]])                     # padding past seq_len is fine
    np.testing.assert_allclose(paged_attention(q, c.k[0], c.v[0], t, 40), paged_attention(q, c.k[0], c.v[0], table, 40))
