"""Chapter 13's step_feed: the inputs of one step, against chapter 09's per-sequence bookkeeping.

Every row's token, position and K/V slot must be what the cache says for that sequence
(`KVCache.slot_mapping`, `tokens`), the padding must be inert (slot -1, length 0), and positions
outside a sequence must be a KVCacheError naming it.
"""
import numpy as np
import pytest

from tffedu.errors import KVCacheError
from tffedu.kvcache import KVCache
from tffedu.runner import bucket, step_feed


@pytest.fixture
def cache():
    rng = np.random.default_rng(0)
    c = KVCache(2, 1, 4, 256, 16, dtype=None, prefix_caching=False)
    for sid in range(12):
        c.admit(sid, rng.integers(0, 1000, int(rng.integers(1, 200))).tolist())
    return c


def reference(cache, seqs, starts, chunks):
    "The rows one sequence at a time, from the cache's own bookkeeping."
    ids, pos, slots = [], [], []
    for sid, s0, n in zip(seqs, starts, chunks):
        ids += cache.seqs[sid].tokens[s0:s0 + n]
        pos += range(s0, s0 + n)
        slots += cache.slot_mapping(sid, s0, n).tolist()
    return ids, pos, slots


@pytest.mark.parametrize("trial", range(40))
def test_rows_match_the_cache_per_sequence(cache, trial):
    rng = np.random.default_rng(trial)
    B = int(rng.integers(1, 9))
    seqs = [int(s) for s in rng.choice(12, B, replace=False)]
    lens = [cache.seq_len(s) for s in seqs]
    decode = trial % 3 == 0
    starts = [L - 1 if decode else int(rng.integers(0, L)) for L in lens]
    chunks = [1 if decode else int(rng.integers(1, L - s0 + 1)) for s0, L in zip(starts, lens)]
    kind = "decode" if decode else "prefill"
    f = step_feed(cache, seqs, starts, chunks, kind)
    N = sum(chunks)
    ids, pos, slots = reference(cache, seqs, starts, chunks)
    assert f["ids"][:N].tolist() == ids and f["pos"][:N].tolist() == pos and f["slots"][:N].tolist() == slots
    assert (f["slots"][N:] == -1).all() and (f["seq_lens"][B:] == 0).all()          # inert padding
    assert len(f["ids"]) == (bucket(B) if decode else bucket(N)) and len(f["seq_lens"]) == bucket(B)
    assert f["seq_lens"][:B].tolist() == [s0 + n for s0, n in zip(starts, chunks)]
    assert f["cu_seqlens"].tolist() == [0, *np.cumsum(chunks).tolist(), *[N] * (bucket(B) - B)]
    assert f["last"][:B].tolist() == (np.cumsum(chunks) - 1).tolist()
    tables, _ = cache.batch_tables(seqs)
    assert (f["page_tables"][:B, :tables.shape[1]] == tables).all()


def test_a_logits_step_has_no_last(cache):
    assert "last" not in step_feed(cache, [3], [0], [cache.seq_len(3)], "logits")


@pytest.mark.parametrize("start,n", [(-1, 1), (0, 10_000), (5, 0x7FFFFFFF)])
def test_positions_outside_a_sequence_are_refused(cache, start, n):
    L = cache.seq_len(4)
    with pytest.raises(KVCacheError, match=r"sequence 4: positions .* outside its %d tokens" % L):
        step_feed(cache, [1, 4], [0, start], [1, n])
