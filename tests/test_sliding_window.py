"""Sliding-window attention (Mistral) on the CPU, against HF transformers' MistralForCausalLM float32
and torch SDPA: the window's mask in every attention op, the KV cache giving back the pages no
later query sees, and the engine running a sequence many windows long in the pages one window needs.
"""
import numpy as np
import pytest
import torch

import tffedu
import tffedu.model
from tffedu.config import config_from_gguf, config_from_hf
from tffedu.errors import ConfigError, KVCacheError
from tffedu.kvcache import KVCache, paged_attention, paged_attention_varlen
from tffedu.factory import OPS
from hf_models import hf_logits, rel_err, save_bf16, tiny_mistral, write_gguf

TOL = 1e-4
PROMPT = [11, 250, 3, 499, 17, 17, 64, 128, 5, 300, 42, 7, 8, 9, 10, 400, 401, 2, 33, 44, 55]


def argmax_chain(hf, prompt, n: int) -> list[int]:
    "HF's greedy continuation by full forward passes, EOS a token like any other (ignore_eos's semantics)."
    seq = list(prompt)
    for _ in range(n):
        seq.append(int(hf_logits(hf, seq)[-1].argmax()))
    return seq[len(prompt):]


def sdpa_window(q, k, v, pos, window):
    "torch float64: q [T, Hq, D] at positions pos over k, v [S, Hkv, D]; key j visible if pos - window < j <= pos."
    g = q.shape[1] // k.shape[1]
    qt = torch.from_numpy(q.astype(np.float64)).transpose(0, 1)
    kt = torch.from_numpy(k.astype(np.float64)).repeat_interleave(g, 1).transpose(0, 1)
    vt = torch.from_numpy(v.astype(np.float64)).repeat_interleave(g, 1).transpose(0, 1)
    j, p = torch.arange(len(k))[None, :], torch.as_tensor(np.asarray(pos))[:, None]
    mask = (j <= p) & (j > p - window)
    return torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, attn_mask=mask).transpose(0, 1).numpy()


# ---- the ops ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("window", [1, 2, 5, 40])
def test_attention_op_window_is_torch(window):
    rng = np.random.default_rng(window)
    T, Hq, Hkv, D = 9, 6, 2, 16
    q, k, v = (rng.standard_normal((T, h, D)).astype(np.float32) for h in (Hq, Hkv, Hkv))
    got = OPS.get("attention", "cpu")(q, k, v, window=window)
    assert rel_err(got, sdpa_window(q, k, v, np.arange(T), window)) < 1e-5
    cache = rng.standard_normal((2, 30, Hkv, D)).astype(np.float32)      # a contiguous KV cache
    pos = np.arange(12, 12 + T, dtype=np.int32)
    got = OPS.get("attention", "cpu")(q, k, v, cache, pos, window=window)
    assert rel_err(got, sdpa_window(q, cache[0, :21], cache[1, :21], pos, window)) < 1e-5


@pytest.mark.parametrize("window,page_size", [(1, 4), (3, 1), (7, 4), (16, 16), (64, 8)])
def test_paged_varlen_window_is_torch(window, page_size):
    """Three sequences of a flat batch (two prompt chunks, one decode row) through scattered pages:
    each row equals SDPA over its own keys with the window's mask."""
    rng = np.random.default_rng(page_size)
    Hq, Hkv, D = 4, 2, 8
    lens, new = [37, 9, 20], [5, 9, 1]
    c = KVCache(1, Hkv, D, num_pages=80, page_size=page_size)
    kv = {b: rng.standard_normal((2, L, Hkv, D)).astype(np.float32) for b, L in enumerate(lens)}
    rows = []
    for b, L in enumerate(lens):
        c.admit(b, range(L))
        c.write(b, 0, 0, *(x[:L - new[b]] for x in kv[b]))
        rows += [(b, t) for t in range(L - new[b], L)]
    N = len(rows)
    q = rng.standard_normal((N, Hq, D)).astype(np.float32)
    k, v = (np.stack([kv[b][i][t] for b, t in rows]) for i in (0, 1))
    slots = np.concatenate([c.slot_mapping(b, t, 1) for b, t in rows])
    pos = np.array([t for _, t in rows], np.int32)
    tables, seq_lens = c.batch_tables([0, 1, 2])
    cu = np.cumsum([0] + new).astype(np.int32)
    got = paged_attention_varlen(q, k, v, c.k[0], c.v[0], slots, tables, seq_lens, cu, pos, window=window)
    for b in range(3):
        lo, hi = cu[b], cu[b + 1]
        assert rel_err(got[lo:hi], sdpa_window(q[lo:hi], kv[b][0], kv[b][1], pos[lo:hi], window)) < 1e-5
    # and a window changes the answer wherever a row has more keys than the window
    if window < 20:
        full = paged_attention_varlen(q, k, v, c.k[0], c.v[0], slots, tables, seq_lens, cu, pos)
        assert rel_err(got, full) > 1e-3


# ---- the cache -------------------------------------------------------------------------------------
def decode_run(cache, sid, n_total, kv=None):
    "One sequence admitted with one token, then decoded one token per step to n_total; pages held per step."
    held = []
    cache.admit(sid, [0])
    for n in range(1, n_total + 1):
        if kv is not None:
            cache.write(sid, 0, n - 1, kv[0, n - 1:n], kv[1, n - 1:n])
        cache.commit(sid, 1, list(range(n)))
        held.append(cache.pages_held(sid))
        if n < n_total:
            cache.extend(sid)
    return held


@pytest.mark.parametrize("window,page_size", [(1, 1), (4, 4), (5, 4), (12, 4), (9, 32)])
def test_a_sequence_holds_one_window_of_pages(window, page_size):
    c = KVCache(1, 1, 4, num_pages=64, page_size=page_size, window=window)
    n_total = 4 * window + 2 * page_size
    held = decode_run(c, "s", n_total)
    assert max(held) <= c.most_pages(1, n_total) <= c.pages_for(window) + 1
    seq = c.seqs["s"]
    assert seq.pages[:seq.n_dropped] == [-1] * seq.n_dropped and -1 not in seq.pages[seq.n_dropped:]
    oldest = n_total - window + 1                     # the oldest key the next query (at n_total) sees
    assert seq.n_dropped * page_size <= max(oldest, 0) < (seq.n_dropped + 1) * page_size  # all that can go
    assert c.n_free_pages == c.num_pages - c.pages_held("s")  # no page leaked
    c.free("s")
    assert c.n_free_pages == c.num_pages


def test_windowed_cache_reads_what_torch_reads():
    W, P, n_total, Hq, Hkv, D = 6, 4, 40, 4, 2, 8
    rng = np.random.default_rng(0)
    kv = rng.standard_normal((2, n_total, Hkv, D)).astype(np.float32)
    c = KVCache(1, Hkv, D, num_pages=8, page_size=P, window=W)
    decode_run(c, 0, n_total, kv)
    q = rng.standard_normal((3, Hq, D)).astype(np.float32)
    got = paged_attention(q, c.k[0], c.v[0], c.page_table(0), n_total, window=W)
    assert rel_err(got, sdpa_window(q, kv[0], kv[1], np.arange(n_total - 3, n_total), W)) < 1e-5
    with pytest.raises(KVCacheError, match="not one of"):     # a read past the window meets a -1
        paged_attention(q, c.k[0], c.v[0], c.page_table(0), n_total, window=W + 2 * P)
    with pytest.raises(KVCacheError, match="left its window"):
        c.slots(0, 0, 1)


def test_fork_free_truncate_share_with_dropped_pages():
    W, P = 4, 2
    c = KVCache(1, 1, 4, num_pages=40, page_size=P, window=W)
    decode_run(c, "a", 15)
    assert c.seqs["a"].n_dropped > 0
    c.fork("a", "b")
    assert c.seqs["b"].n_dropped == c.seqs["a"].n_dropped
    with pytest.raises(KVCacheError, match="left the window"):
        c.truncate("a", 2)
    c.extend("a", 3)                         # three drafts, say; rejected again:
    c.truncate("a", 15)                      # back to where the window still holds every key
    for sid in ("a", "b"):
        c.free(sid)
    assert c.n_free_pages == c.num_pages
    assert all(p.ref_count == 0 for p in c.pool.pages)
    # a dropped page that was published stays cached: the same prefix admitted again finds it
    c.admit("c", list(range(15)))
    assert c.seqs["c"].n_computed == 14 // P * P


def test_window_must_be_a_count():
    for bad in (-1, 1.5, True, "4"):
        with pytest.raises(KVCacheError, match="window"):
            KVCache(1, 1, 4, 8, 4, window=bad)


# ---- the config ------------------------------------------------------------------------------------
def test_config_reads_mistral_windows():
    base = {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 96,
            "vocab_size": 100}
    assert config_from_hf({**base, "model_type": "mistral", "sliding_window": 4096}).sliding_window == 4096
    assert config_from_hf({**base, "model_type": "mistral", "sliding_window": None}).sliding_window == 0
    # Qwen2/Qwen3 keep a sliding_window next to a switch that is off: no window
    assert config_from_hf({**base, "model_type": "qwen3", "use_sliding_window": False,
                           "sliding_window": 4096}).sliding_window == 0
    with pytest.raises(ConfigError, match="sliding_window"):
        config_from_hf({**base, "model_type": "mistral", "sliding_window": -3})
    with pytest.raises(ConfigError, match="sliding_window"):
        config_from_hf({**base, "model_type": "mistral", "sliding_window": "4k"})
    meta = {"general.architecture": "llama", "llama.block_count": 2, "llama.embedding_length": 64,
            "llama.attention.head_count": 4, "llama.feed_forward_length": 96, "llama.vocab_size": 100,
            "llama.attention.layer_norm_rms_epsilon": 1e-5}
    assert config_from_gguf(meta).sliding_window == 0
    assert config_from_gguf({**meta, "llama.attention.sliding_window": 4096}).sliding_window == 4096
    with pytest.raises(ConfigError, match="llama.attention.sliding_window"):
        config_from_gguf({**meta, "llama.attention.sliding_window": 1 << 30})


# ---- the model against HF --------------------------------------------------------------------------
CASES = {   # name -> (shape kwargs, weight type); every window is shorter than PROMPT
    "gqa2-window4": (dict(hidden=64, heads=4, kv_heads=2, window=4), "F32"),
    "mqa-window7-3layers": (dict(hidden=96, heads=6, kv_heads=1, layers=3, ffn=160, window=7), "F32"),
    "gqa4-window5-Q8_0": (dict(hidden=64, heads=8, kv_heads=2, head_dim=16, window=5), "Q8_0"),
    "mha-window2-tied-BF16": (dict(hidden=64, heads=4, kv_heads=4, tied=True, window=2), "BF16"),
}


@pytest.fixture(scope="module", params=list(CASES))
def pair(request, tmp_path_factory):
    kw, wtype = CASES[request.param]
    hf = tiny_mistral(seed=len(request.param), **kw)
    return hf, write_gguf(hf, tmp_path_factory.mktemp("gguf") / f"{request.param}.gguf", wtype)


def test_logits_match_hf(pair):
    hf, path = pair
    ref = hf_logits(hf, PROMPT)
    unwindowed = hf.config.sliding_window
    hf.config.sliding_window = None                  # the same weights, the whole context
    try:
        assert rel_err(hf_logits(hf, PROMPT), ref) > 1e-3, "the window must matter at this length"
    finally:
        hf.config.sliding_window = unwindowed
    for m in (tffedu.model.load(path), tffedu.load(path)):   # chapter 08's contiguous cache, the engine
        assert m.config.sliding_window == hf.config.sliding_window
        assert rel_err(m.logits(PROMPT), ref) < TOL


def test_greedy_matches_hf_past_the_window(pair):
    hf, path = pair
    m = tffedu.load(path)
    ref = argmax_chain(hf, PROMPT[:5], 24)
    assert m.generate(PROMPT[:5], max_new_tokens=24, ignore_eos=True).tokens == ref
    assert tffedu.model.load(path).generate(PROMPT[:5], max_new_tokens=24, ignore_eos=True).tokens == ref
    with torch.no_grad():                     # and HF's own generate, stopping where we stop
        hf_ref = hf.generate(torch.tensor([PROMPT[:5]]), max_new_tokens=24, do_sample=False,
                             eos_token_id=sorted(m.eos_ids))[0, 5:].tolist()
    assert m.generate(PROMPT[:5], max_new_tokens=24).tokens == hf_ref


def run_in_one_window(m, prompt, n_new: int, W: int, P: int):
    """An engine whose pool holds exactly `most_pages` pages of P runs prompt + n_new tokens:
    (the request, the pages held after each step, the engine). Used on the GPU too (test_gpu_model)."""
    from tffedu.engine import Engine
    probe = KVCache(1, 1, 1, 1, P, dtype=None, window=W)
    eng = Engine(m, page_size=P, num_pages=probe.most_pages(len(prompt), len(prompt) + n_new))
    assert eng.cache.window == W and eng.cache.num_pages == probe.pages_for(W) + 1
    req = eng.add(prompt, max_new_tokens=n_new, ignore_eos=True)
    held = []
    while eng.busy:
        eng.step()
        held.append(eng.cache.num_pages - eng.cache.n_free_pages)
    return req, held, eng


def test_a_sequence_four_windows_long_in_one_window_of_pages(tmp_path):
    """The engine with a pool of exactly `most_pages` pages: a prompt and 4 windows of new tokens
    run without a preemption, the pages held never pass the window's, and the tokens are HF's."""
    W, P = 8, 4
    hf = tiny_mistral(seed=21, window=W)
    m = tffedu.load(write_gguf(hf, tmp_path / "m.gguf"))
    prompt, n_new = PROMPT[:6], 4 * W
    req, held, eng = run_in_one_window(m, prompt, n_new, W, P)
    assert req.tokens == argmax_chain(hf, prompt, n_new)
    assert max(held) <= eng.cache.pages_for(W) + 1 and eng.stats["preempted"] == 0
    assert len(prompt) + n_new >= 4 * W


def test_hf_folder_bf16_sharded(tmp_path):
    "A Mistral HF folder (model_type mistral, BF16 shards + index): a llama with a window."
    hf = tiny_mistral(seed=5, hidden=96, heads=6, kv_heads=2, ffn=160, window=6)
    save_bf16(hf, tmp_path)
    m = tffedu.load(tmp_path)
    assert (m.config.arch, m.config.sliding_window) == ("llama", 6)
    assert rel_err(m.logits(PROMPT), hf_logits(hf, PROMPT)) < TOL
    assert m.generate(PROMPT[:5], max_new_tokens=12, ignore_eos=True).tokens == argmax_chain(hf, PROMPT[:5], 12)


def test_batches_and_prefix_sharing_through_the_window(tmp_path):
    """generate_batch of prompts of several lengths == each alone; a prompt sharing a prefix with one
    whose early pages left the window still finds them cached (published pages outlive the window)."""
    W, P = 6, 4
    hf = tiny_mistral(seed=13, window=W)
    m = tffedu.load(write_gguf(hf, tmp_path / "m.gguf"))
    prompts = [PROMPT[:3], PROMPT[:11], PROMPT[2:19]]
    alone = [argmax_chain(hf, p, 10) for p in prompts]
    assert [g.tokens for g in m.generate_batch(prompts, max_new_tokens=10, ignore_eos=True)] == alone
    from tffedu.engine import Engine
    eng = Engine(m, page_size=P, num_pages=64)
    a = eng.add(PROMPT[:16], max_new_tokens=4, ignore_eos=True)
    while eng.busy:
        eng.step()
    b = eng.add(PROMPT[:13] + [99, 98, 97], max_new_tokens=4, ignore_eos=True)
    while eng.busy:
        eng.step()
    assert b.n_cached == 12 and eng.stats["cached_tokens"] == 12     # three full pages, the first out of the window
    assert (a.tokens, b.tokens) == (argmax_chain(hf, PROMPT[:16], 4), argmax_chain(hf, PROMPT[:13] + [99, 98, 97], 4))
