"""Chapter 13's StepInput: the inputs of one step, against chapter 09's per-sequence bookkeeping.

Every row's token, position and K/V slot must be what the cache says for that sequence
(`KVCache.slot_mapping`) and what its owner's token list holds, the padding must be inert (slot -1,
length 0), positions outside a sequence must be a KVCacheError naming it, and the record's fields
must be exactly the inputs of the runner's graphs.
"""
import numpy as np
import pytest

from tffedu.errors import KVCacheError
from tffedu.kvcache import KVCache
from tffedu.errors import GraphError
from tffedu.lowering import STEP_KINDS
from tffedu.runner import StepInput, bucket


TOKENS = {}   # sid -> its token ids: the owner's (a request's), not the cache's


@pytest.fixture
def cache():
    rng = np.random.default_rng(0)
    c = KVCache(2, 1, 4, 256, 16, dtype=None, prefix_caching=False)
    for sid in range(12):
        TOKENS[sid] = rng.integers(0, 1000, int(rng.integers(1, 200))).tolist()
        c.admit(sid, TOKENS[sid])
    return c


def build(cache, kind, seqs, starts, chunks):
    ids = [t for sid, s0, n in zip(seqs, starts, chunks) for t in TOKENS[sid][s0:s0 + n]]
    return StepInput.build(cache, kind, seqs, starts, chunks, ids)


def reference(cache, seqs, starts, chunks):
    "The rows one sequence at a time, from the cache's own bookkeeping."
    ids, pos, slots = [], [], []
    for sid, s0, n in zip(seqs, starts, chunks):
        ids += TOKENS[sid][s0:s0 + n]
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
    f = build(cache, kind, seqs, starts, chunks).feed()
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
    inp = build(cache, "logits", [3], [0], [cache.seq_len(3)])
    assert "last" not in inp.feed() and inp.logits and not inp.ids_from_last


def test_the_record_is_the_graphs_inputs(cache):
    "StepInput's fields are the graph's inputs, for every kind of step (the runner loads one into the other)."
    from tffedu.kvcache import KVCache as _K
    from tffedu.lowering import PagedGraphs
    import tffedu.model
    model = tffedu.model.load(warm=False)           # the default model: its creator builds the graphs
    c = _K(model.config.n_layer, model.config.n_head_kv, model.config.head_dim, 8, 16, dtype=None)
    graphs = PagedGraphs(model.creator, c.page_shape)
    for kind in STEP_KINDS:
        g = graphs.build(kind, 4, 2 if kind != "logits" else 1, 4)
        want = set(StepInput.GRAPH_INPUTS) - ({"last"} if kind == "logits" else set())
        assert {n.name for n in g.nodes if n.kind == "input"} == want, kind


def test_ids_are_given_or_come_from_the_device(cache):
    inp = StepInput.build(cache, "decode", [1, 2], [0, 0], [1, 1])
    assert inp.ids_from_last and inp.bucket == ("decode", 2, 2, inp.page_tables.shape[1])
    with pytest.raises(GraphError, match="token ids"):
        StepInput.build(cache, "prefill", [1], [0], [1], [5, 6])
    with pytest.raises(GraphError, match="decode step"):
        StepInput.build(cache, "decode", [1], [0], [2], [5, 6])
    with pytest.raises(GraphError, match="a step is one of"):
        StepInput.build(cache, "verify", [1], [0], [1], [5])


@pytest.mark.parametrize("start,n", [(-1, 1), (0, 10_000), (5, 0x7FFFFFFF)])
def test_positions_outside_a_sequence_are_refused(cache, start, n):
    L = cache.seq_len(4)
    with pytest.raises(KVCacheError, match=r"sequence 4: positions .* outside its %d tokens" % L):
        StepInput.build(cache, "prefill", [1, 4], [0, start], [1, n])


def test_buckets_double_then_step():
    """A bucket holds its n: powers of two up to BUCKET_STEP (a handful of shapes for every batch),
    then multiples of it, so a long prompt pads fewer than BUCKET_STEP rows, not up to n - 1."""
    from tffedu.runner import BUCKET_STEP
    for n in [1, 2, 3, 5, 100, 4095, 4096, 4097, 8192, 8193, 20000, 32768, 32769, 100001]:
        b = bucket(n)
        assert b >= n
        if n <= BUCKET_STEP:
            assert b & (b - 1) == 0 and b < 2 * n
        else:
            assert b % BUCKET_STEP == 0 and b - n < BUCKET_STEP
