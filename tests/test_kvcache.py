"""The paged KV cache (tffedu.kvcache, chapter 09).

The heart is a hypothesis state machine that drives one KVCache with random admits (often
sharing a prefix with a live or finished sequence), extends, computes (write + commit), forks,
frees, preemptions and finishes, and checks after every step, against its own model of the
sequences:

* every page is owned by the sequences whose tables hold it, and only by them: ref counts equal
  the number of table entries, shared pages are full and computed in every owner, the free and
  cached queues hold exactly the pages nobody owns (nothing leaked, nothing owned twice);
* every sequence reads back, through its page table, exactly the K/V its own tokens produce
  (K/V here are a hash of the token prefix, as in a real model) - so a wrong prefix hit, a bad
  fork or an overwrite of a shared page shows up as wrong values;
* an out-of-pages KVCacheError is raised only when the pages really do not suffice, and leaves
  the cache unchanged;
* when everything is freed the pool is full again.
"""
import collections

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import (RuleBasedStateMachine, initialize, invariant, precondition, rule,
                                 run_state_machine_as_test)

from tffedu.errors import KVCacheError, ShapeError
from tffedu.kvcache import KVCache

N_LAYERS = 2
STEPS = collections.Counter()  # rule name -> how often it ran, over all examples


def prefix_hashes(tokens):
    "h[p]: a polynomial hash of tokens[:p+1], < 2**23 so that it is exact in float32."
    out, h = [], 0
    for t in tokens:
        h = (h * 1_000_003 + t + 1) % 8_388_593
        out.append(h)
    return out


def expected_kv(tokens, start, stop, layer):
    "The K/V 'the model' produces at positions start..stop-1: functions of the token prefix."
    h = np.array(prefix_hashes(tokens)[start:stop], np.float32)
    p = np.arange(start, stop, dtype=np.float32)
    k = np.stack([p + 1000 * layer, h], -1)[:, None, :]  # [n, 1 head, 2]
    v = np.stack([h + layer, -p], -1)[:, None, :]
    return k, v


def snapshot(cache):
    return (cache.n_free_pages, {s: (cache.page_table(s).tolist(), cache.seq_len(s), cache.n_computed(s))
                                 for s in cache.seqs}, [p.ref_count for p in cache.pool.pages])


class KVCacheMachine(RuleBasedStateMachine):
    @initialize(page_size=st.sampled_from([1, 2, 3, 4]), num_pages=st.integers(3, 24),
                prefix_caching=st.booleans())
    def setup(self, page_size, num_pages, prefix_caching):
        self.P, self.N = page_size, num_pages
        self.cache = KVCache(N_LAYERS, 1, 2, num_pages, page_size, prefix_caching=prefix_caching)
        self.tokens, self.computed = {}, {}  # the model: seq id -> tokens, n computed
        self.finished = []  # token lists of freed sequences (their pages may be cached)
        self.next_id = 0

    def pages_for(self, n):
        return -(-n // self.P)

    def count(self, name):
        STEPS[name] += 1

    # ---- rules ---------------------------------------------------------------------------------
    @rule(data=st.data(), suffix=st.lists(st.integers(0, 2), max_size=9))
    def admit(self, data, suffix):
        self.count("admit")
        sources = list(self.tokens.values()) + self.finished
        prefix = []
        if sources and data.draw(st.booleans(), label="share a prefix"):
            src = data.draw(st.sampled_from(sources), label="prefix source")
            prefix = src[:data.draw(st.integers(0, len(src)), label="prefix length")]
        tokens = prefix + suffix
        if not tokens:
            tokens = [0]
        sid, before = self.next_id, snapshot(self.cache)
        try:
            n_cached = self.cache.admit(sid, tokens)
        except KVCacheError:
            assert self.cache.n_free_pages < self.pages_for(len(tokens)), "admit refused although pages suffice"
            assert snapshot(self.cache) == before, "a failed admit changed the cache"
            return
        self.next_id += 1
        assert n_cached % self.P == 0 and 0 <= n_cached <= len(tokens) - 1
        if not self.cache.prefix_caching:
            assert n_cached == 0
        self.tokens[sid], self.computed[sid] = list(tokens), n_cached

    @precondition(lambda self: self.tokens)
    @rule(data=st.data(), new=st.lists(st.integers(0, 2), min_size=1, max_size=6))
    def extend(self, data, new):
        self.count("extend")
        sid = data.draw(st.sampled_from(sorted(self.tokens)), label="seq")
        before, n = snapshot(self.cache), len(self.tokens[sid])
        assert self.cache.extend_cost(sid, len(new)) == self.pages_for(n + len(new)) - self.pages_for(n)
        try:
            self.cache.extend(sid, len(new))
        except KVCacheError:
            assert self.cache.n_free_pages < self.pages_for(n + len(new)) - self.pages_for(n)
            assert snapshot(self.cache) == before, "a failed extend changed the cache"
            return
        self.tokens[sid] += new

    @precondition(lambda self: any(len(t) > self.computed[s] for s, t in self.tokens.items()))
    @rule(data=st.data())
    def compute(self, data):
        "A forward pass over some uncomputed tokens of one sequence: write every layer, commit."
        self.count("compute")
        sid = data.draw(st.sampled_from(sorted(s for s, t in self.tokens.items() if len(t) > self.computed[s])))
        start = self.computed[sid]
        stop = data.draw(st.integers(start + 1, len(self.tokens[sid])), label="stop")
        for layer in range(N_LAYERS):
            self.cache.write(sid, layer, start, *expected_kv(self.tokens[sid], start, stop, layer))
        self.cache.commit(sid, stop - start, self.tokens[sid])
        self.computed[sid] = stop

    @precondition(lambda self: self.tokens)
    @rule(data=st.data())
    def truncate(self, data):
        "Drop a sequence's last tokens (rejected drafts); the page the next token lands in must be private."
        self.count("truncate")
        sid = data.draw(st.sampled_from(sorted(self.tokens)), label="seq")
        n = data.draw(st.integers(0, len(self.tokens[sid])), label="keep")
        before = snapshot(self.cache)
        try:
            copies = self.cache.truncate(sid, n)
        except KVCacheError:
            assert self.cache.n_free_pages == 0, "truncate refused although a page was free"
            assert snapshot(self.cache) == before, "a failed truncate changed the cache"
            return
        assert all(src != dst for src, dst in copies) and len(copies) <= 1
        del self.tokens[sid][n:]
        self.computed[sid] = min(self.computed[sid], n)

    @precondition(lambda self: self.tokens)
    @rule(data=st.data())
    def fork(self, data):
        self.count("fork")
        src = data.draw(st.sampled_from(sorted(self.tokens)), label="src")
        before, dst = snapshot(self.cache), self.next_id
        try:
            self.cache.fork(src, dst)
        except KVCacheError:
            need = self.pages_for(len(self.tokens[src])) - self.computed[src] // self.P
            assert self.cache.n_free_pages < need, "fork refused although pages suffice"
            assert snapshot(self.cache) == before, "a failed fork changed the cache"
            return
        self.next_id += 1
        self.tokens[dst], self.computed[dst] = list(self.tokens[src]), self.computed[src]

    @precondition(lambda self: self.tokens)
    @rule(data=st.data())
    def free(self, data):
        "Finish (or abort) a sequence."
        self.count("free")
        sid = data.draw(st.sampled_from(sorted(self.tokens)), label="seq")
        self.cache.free(sid)
        self.finished.append(self.tokens.pop(sid))
        del self.computed[sid]

    @precondition(lambda self: self.tokens)
    @rule(data=st.data())
    def preempt(self, data):
        "What a scheduler does when out of pages: free a sequence, later re-admit all its tokens."
        self.count("preempt")
        sid = data.draw(st.sampled_from(sorted(self.tokens)), label="seq")
        tokens = self.tokens.pop(sid)
        del self.computed[sid]
        self.cache.free(sid)
        try:
            n_cached = self.cache.admit(sid, tokens)
        except KVCacheError:
            self.finished.append(tokens)
            return
        self.tokens[sid], self.computed[sid] = tokens, n_cached

    @precondition(lambda self: self.tokens)
    @rule()
    def bad_calls(self):
        "Misuse is a KVCacheError and changes nothing."
        self.count("bad_calls")
        before = snapshot(self.cache)
        with pytest.raises(KVCacheError):
            self.cache.free("no such sequence")
        if self.tokens:
            sid = min(self.tokens)
            with pytest.raises(KVCacheError):
                self.cache.admit(sid, [1])
            with pytest.raises(KVCacheError):
                self.cache.commit(sid, len(self.tokens[sid]) - self.computed[sid] + 1, self.tokens[sid])
            with pytest.raises(KVCacheError):
                self.cache.truncate(sid, len(self.tokens[sid]) + 1)
            with pytest.raises(KVCacheError):
                self.cache.extend(sid, -1)
            if self.computed[sid]:  # computed positions (maybe shared) are read-only
                with pytest.raises(KVCacheError):
                    self.cache.write(sid, 0, 0, *expected_kv(self.tokens[sid], 0, 1, 0))
        assert snapshot(self.cache) == before

    # ---- invariants ----------------------------------------------------------------------------
    @invariant()
    def pages_are_owned_once_and_counted(self):
        if not hasattr(self, "cache"):
            return
        c = self.cache
        owners = collections.Counter()
        for sid, tokens in self.tokens.items():
            table = c.page_table(sid).tolist()
            assert c.seq_len(sid) == len(tokens) and c.n_computed(sid) == self.computed[sid]
            assert len(table) == self.pages_for(len(tokens))
            assert len(set(table)) == len(table), f"seq {sid} holds a page twice: {table}"
            owners.update(table)
        for pid, page in enumerate(c.pool.pages):
            assert page.ref_count == owners[pid], f"page {pid}: ref_count {page.ref_count}, owners {owners[pid]}"
        used = set(owners)
        free = {pid for pid in range(self.N) if c.pool.is_free(pid)}  # free slots of the FixedSlotPool
        cached = set(c.pool.cached)
        assert not (free & cached) and not (used & (free | cached)), "a page is both used and free"
        assert used | free | cached == set(range(self.N)), "a page was leaked"
        assert c.n_free_pages == self.N - len(used) == len(free) + len(cached)
        for pid in cached:
            assert c.pool.pages[pid].hash is not None
        # a page with several owners must be full and computed in each of them
        for sid, tokens in self.tokens.items():
            for i, pid in enumerate(c.page_table(sid).tolist()):
                if owners[pid] > 1:
                    assert (i + 1) * self.P <= self.computed[sid], f"shared page {pid} is writable in seq {sid}"

    @invariant()
    def every_sequence_reads_its_own_kv(self):
        if not hasattr(self, "cache"):
            return
        for sid, tokens in self.tokens.items():
            n = self.computed[sid]
            for layer in range(N_LAYERS):
                k, v = self.cache.gather(sid, layer, n)
                ek, ev = expected_kv(tokens, 0, n, layer)
                assert np.array_equal(k, ek) and np.array_equal(v, ev), f"seq {sid} layer {layer}: wrong K/V"

    def teardown(self):
        if not hasattr(self, "cache"):
            return
        for sid in list(self.tokens):
            self.cache.free(sid)
        assert self.cache.n_free_pages == self.N
        assert all(p.ref_count == 0 for p in self.cache.pool.pages)
        assert not self.cache.seqs


def test_kvcache_state_machine():
    STEPS.clear()
    run_state_machine_as_test(KVCacheMachine, settings=settings(
        max_examples=150, stateful_step_count=40, deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]))
    total = sum(STEPS.values())
    print(f"\nKV cache state machine: {total} steps over 150 examples: {dict(STEPS)}")
    assert total >= 2000, f"only {total} steps ran"
    for name in ("admit", "extend", "compute", "truncate", "fork", "free", "preempt"):
        assert STEPS[name] >= 50, f"rule {name} ran only {STEPS[name]} times"


# ---- the corner cases, one by one ------------------------------------------------------------
def make(P=4, N=16, **kw):
    return KVCache(N_LAYERS, 1, 2, N, P, **kw)


def prefill(cache, sid, tokens, start):
    for layer in range(N_LAYERS):
        cache.write(sid, layer, start, *expected_kv(tokens, start, len(tokens), layer))
    cache.commit(sid, len(tokens) - start, tokens)


def test_prefix_hit_shares_pages_and_values():
    c = make()
    a = list(range(10))
    assert c.admit("a", a) == 0
    prefill(c, "a", a, 0)
    b = a[:8] + [50, 51, 52]
    assert c.admit("b", b) == 8  # two full pages of 4
    assert c.page_table("b")[:2].tolist() == c.page_table("a")[:2].tolist()
    assert c.page_table("b")[2] not in c.page_table("a")
    prefill(c, "b", b, 8)
    k, _ = c.gather("b", 1)
    assert np.array_equal(k, expected_kv(b, 0, 11, 1)[0])


def test_prompt_entirely_cached_still_computes_last_page():
    c = make()
    a = list(range(8))
    c.admit("a", a); prefill(c, "a", a, 0)
    assert c.admit("same", a) == 4  # not 8: the last token must be computed for its logits
    assert c.admit("longer", a + [9]) == 8
    assert c.admit("one page", a[:4]) == 0


def test_identical_prompts_admitted_in_the_same_step():
    c = make()
    t = [3, 1, 4, 1, 5, 9, 2, 6, 5]
    assert c.admit("t1", t) == 0 and c.admit("t2", t) == 0  # nothing computed yet: no false hits
    assert not set(c.page_table("t1")) & set(c.page_table("t2"))
    prefill(c, "t1", t, 0); prefill(c, "t2", t, 0)
    assert c.admit("t3", t) == 8
    for s in ("t1", "t2", "t3"):
        k, v = c.gather(s, 0, c.n_computed(s))
        assert np.array_equal(k, expected_kv(t, 0, c.n_computed(s), 0)[0])
        c.free(s)
    assert c.n_free_pages == c.num_pages


def test_freed_pages_are_revived_then_evicted():
    c = make(P=2, N=4)
    a = [1, 2, 3, 4, 5]
    c.admit("a", a); prefill(c, "a", a, 0)
    c.free("a")
    assert c.n_free_pages == 4 and len(c.pool.cached) == 2  # two full pages stay cached
    assert c.admit("b", a) == 4  # revived
    c.free("b")
    c.admit("c", [7, 7, 7, 7, 7, 7, 7, 7])  # needs all 4 pages: evicts the cached ones
    c.free("c")
    assert c.admit("d", a) == 0  # gone from the prefix table, no stale hit


def test_prefix_caching_off():
    c = make(prefix_caching=False)
    a = list(range(9))
    c.admit("a", a); prefill(c, "a", a, 0)
    assert c.admit("b", a) == 0
    c.free("a"); c.free("b")
    assert not c.pool.cached and c.n_free_pages == c.num_pages == c.pool.slots.n_free


def test_fork_copies_the_partial_page():
    c = make()
    a = list(range(6))
    c.admit("a", a); prefill(c, "a", a, 0)
    c.fork("a", "f")
    ta, tf = c.page_table("a"), c.page_table("f")
    assert ta[0] == tf[0] and ta[1] != tf[1]  # full page shared, partial page copied
    c.extend("f"); prefill(c, "f", a + [99], 6)
    c.extend("a"); prefill(c, "a", a + [42], 6)
    assert np.array_equal(c.gather("a", 0)[0], expected_kv(a + [42], 0, 7, 0)[0])
    assert np.array_equal(c.gather("f", 0)[0], expected_kv(a + [99], 0, 7, 0)[0])


def test_out_of_pages_is_recoverable():
    c = make(P=4, N=3)
    c.admit("a", list(range(9)))
    before = snapshot(c)
    with pytest.raises(KVCacheError, match="out of KV pages"):
        c.admit("b", list(range(5)))
    with pytest.raises(KVCacheError, match="out of KV pages"):
        c.extend("a", 4)
    with pytest.raises(KVCacheError, match="out of KV pages"):
        c.fork("a", "b")
    assert snapshot(c) == before
    c.extend("a", 3)  # fits in the last page
    c.free("a")
    assert c.admit("b", list(range(5))) == 0


def test_batch_tables_and_errors():
    c = make(P=4)
    c.admit("x", range(9)); c.admit("y", range(3))
    tables, lens = c.batch_tables(["x", "y"])
    assert tables.dtype == np.int32 and lens.dtype == np.int32
    assert tables.shape == (2, 3) and lens.tolist() == [9, 3]
    assert tables[1, 1:].tolist() == [-1, -1] and tables[0].tolist() == c.page_table("x").tolist()
    pages = c.page_table("x")
    assert c.slot_mapping("x", 3, 3).tolist() == [pages[0] * 4 + 3, pages[1] * 4, pages[1] * 4 + 1]
    with pytest.raises(ShapeError):
        c.write("x", 0, 0, np.zeros((2, 1, 3), np.float32), np.zeros((2, 1, 3), np.float32))
    with pytest.raises(KVCacheError, match="outside"):
        c.write("x", 0, 8, *expected_kv(list(range(12)), 8, 10, 0))
    with pytest.raises(KVCacheError, match="layer"):
        c.write("x", 5, 0, *expected_kv(list(range(9)), 0, 1, 0))
    with pytest.raises(KVCacheError, match="at least one token"):
        c.admit("z", [])
    with pytest.raises(KVCacheError):
        KVCache(1, 1, 2, 0)


def test_truncate_gives_back_slots_and_never_writes_a_shared_page():
    "Drafts rejected: slots past n go back; the page the next token lands in is private again."
    c = make(P=4)
    a = list(range(10))
    c.admit("a", a); prefill(c, "a", a, 0)            # pages: 0-3 (full), 4-7 (full), 8-9
    c.fork("a", "f")                                 # f shares a's two full pages
    shared = c.page_table("a")[1]
    assert c.truncate("f", 6) == [(shared, c.page_table("f")[1])]   # copy-on-write of page 2
    assert c.seq_len("f") == c.n_computed("f") == 6 and len(c.page_table("f")) == 2
    c.extend("f", 1); prefill(c, "f", a[:6] + [77], 6)                # f writes its own copy
    assert np.array_equal(c.gather("a", 0)[0], expected_kv(a, 0, 10, 0)[0])    # a is untouched
    assert np.array_equal(c.gather("f", 0)[0], expected_kv(a[:6] + [77], 0, 7, 0)[0])
    c.free("f")
    assert c.truncate("a", 6) == [] and c.pool.pages[shared].hash is None   # ours alone: unpublished
    assert c.admit("b", a) == 4                       # so only the first page is still a prefix hit
    for bad in (7, -1, 2.0, True):
        with pytest.raises(KVCacheError):
            c.truncate("a", bad)
