"""tffedu.memory (chapter 02a): allocators, deterministic free, leak tracker, summary, pools."""
import gc
import os
import pathlib
import shutil
import subprocess
import sys
import threading

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tffedu import memory
from tffedu.errors import AllocationError, DeviceError, RegistryError
from tffedu.memory import (BumpArena, CPUAllocator, FixedSlotPool, FreeListPool, LeakTracker,
                           MemoryBlock, PoolAllocator, get_allocator, live_blocks, memory_summary)
from tffedu.tensor import F16, F32, Tensor

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture
def no_gc():
    "Prove that freeing comes from reference counting alone, not from the cycle collector."
    gc.disable()
    yield
    gc.enable()


def _live_ids():
    return {i.id for i in live_blocks()}


# ---------------------------------------------------------------------------------- allocators

@settings(max_examples=50, deadline=None)
@given(st.integers(0, 10_000))
def test_cpu_allocator_is_64_byte_aligned(n):
    a = CPUAllocator()
    raw = a.allocate(n)
    view = a.host_view(raw, n)
    assert a.address(raw) % 64 == 0 and view.nbytes == n
    assert n == 0 or view.ctypes.data == a.address(raw)


@pytest.mark.parametrize("n,got", [(0, 16), (1, 16), (16, 16), (17, 32), (68_408, 68_416)])
def test_cuda_allocations_are_whole_16_byte_vectors(monkeypatch, n, got):
    """A GEMV copies a weight row's bytes as aligned 16-byte vectors: the last one reaches past a
    tensor of 68,408 bytes (Q8_0 rows of 34-byte blocks), and compute-sanitizer flags every byte
    read past the allocation. So CUDA allocations are rounded up to 16 bytes."""
    asked = []
    fake = type("Drv", (), {"mem_alloc": staticmethod(lambda k: asked.append(k) or k), "Error": Exception})
    monkeypatch.setattr(memory, "cuda_context", lambda: None)
    monkeypatch.setattr(memory, "cuda_driver", lambda: fake)
    memory.CUDAAllocator().allocate(n)
    assert asked == [got]


def test_registry():
    assert isinstance(get_allocator("cpu"), CPUAllocator)
    assert get_allocator("cpu") is get_allocator("CPU")  # one per device while in use
    with pytest.raises(DeviceError, match="tpu"):
        get_allocator("tpu")
    assert "cuda" in memory.ALLOCATORS  # registered, imported only on first use


def test_registry_refuses_duplicates():
    with pytest.raises(RegistryError):
        memory.ALLOCATORS.register("cpu", CPUAllocator)


def test_negative_size():
    with pytest.raises(AllocationError, match="negative"):
        MemoryBlock(-1)


def test_allocator_device_must_match():
    with pytest.raises(DeviceError, match="not on 'cuda'"):
        MemoryBlock(16, "cuda", allocator=CPUAllocator())


# ---------------------------------------------------------------------------------- deterministic free

class CountingAllocator(CPUAllocator):
    def __init__(self):
        self.allocated, self.freed = [], []

    def allocate(self, nbytes):
        raw = super().allocate(nbytes)
        self.allocated.append(self.address(raw))
        return raw

    def deallocate(self, raw):
        self.freed.append(self.address(raw))


def test_block_freed_exactly_once_when_last_reference_goes(no_gc):
    alloc = CountingAllocator()
    b = MemoryBlock(100, allocator=alloc)
    c = b
    bid = b.id
    del b
    assert alloc.freed == [] and bid in _live_ids()
    del c
    assert alloc.freed == alloc.allocated and bid not in _live_ids()


def test_tensor_views_keep_the_block(no_gc):
    alloc = CountingAllocator()
    t = Tensor.empty((8, 8), F32, allocator=alloc)
    v = t.transpose(0, 1)[2:]
    a = v.numpy()
    del t, v
    assert alloc.freed == []          # the numpy view still reads these bytes
    a[0, 0] = 1.0                     # and writing them is safe
    del a
    assert len(alloc.freed) == 1


def test_clone_has_its_own_block(no_gc):
    alloc = CountingAllocator()
    t = Tensor.empty((4,), F32, allocator=alloc)
    c = t.clone()
    del t
    assert len(alloc.freed) == 1 and c.storage.alive


def test_borrowed_blocks_are_not_allocations():
    a = np.zeros(10, np.float32)
    before = _live_ids()
    t = Tensor.from_numpy(a)
    assert t.storage.allocator is None and t.storage.alive and _live_ids() == before


# ---------------------------------------------------------------------------------- leak tracker, summary

def test_leak_tracker_names_the_line():
    keep = []
    with LeakTracker() as lt:
        tmp = Tensor.empty((16,), F32)
        keep.append(Tensor.empty((32,), F16)); line = __import__("inspect").currentframe().f_lineno
        del tmp
    assert len(lt.leaks) == 1
    leak = lt.leaks[0]
    assert leak.nbytes == 64 and leak.dtype == "F16" and leak.device == "cpu"
    assert leak.where.startswith(__file__) and f":{line} " in leak.where
    assert "1 block(s) still alive" in lt.report()
    keep.clear()


def test_leak_tracker_raises_on_request_and_is_quiet_without_leaks():
    keep = []
    with pytest.raises(AllocationError, match="still alive"):
        with LeakTracker(raise_on_leak=True):
            keep.append(MemoryBlock(8))
    keep.clear()
    with LeakTracker(raise_on_leak=True) as lt:
        Tensor.empty((3,), F32)
    assert lt.leaks == [] and lt.report() == "no leaks"


def test_tracebacks_on_request():
    memory.track_tracebacks(True)
    try:
        b = MemoryBlock(8)
    finally:
        memory.track_tracebacks(False)
    assert "test_tracebacks_on_request" in b.info.stack


def test_caller_found_from_a_clone_named_tffedu(tmp_path):
    """`git clone` names the folder `tffedu`, so this file is then .../tffedu/tests/test_memory.py:
    a caller all the same. The two tests above, run from such a folder in a fresh interpreter."""
    clone = tmp_path / "tffedu" / "tests"
    clone.mkdir(parents=True)
    shutil.copy(__file__, clone / "test_memory.py")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                        "--rootdir", str(clone.parent), "-k", "names_the_line or tracebacks_on_request",
                        str(clone / "test_memory.py")], cwd=clone.parent, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "2 passed" in r.stdout, r.stdout[-3000:] + r.stderr[-2000:]


def test_memory_summary_by_device_and_dtype():
    gc.collect()
    before = memory_summary()
    ts = [Tensor.empty((10, 10), F16), Tensor.empty((7,), F32), Tensor.empty((3,), F32)]
    after = memory_summary()
    delta = {k: (after[k][0] - before.get(k, (0, 0))[0], after[k][1] - before.get(k, (0, 0))[1])
             for k in after}
    assert delta[("cpu", "F16")] == (1, 200)
    assert delta[("cpu", "F32")] == (2, 40)
    assert "cpu     F16" in memory.format_memory_summary()
    del ts


# ---------------------------------------------------------------------------------- pools: properties

def _intervals(pool):
    return sorted(pool.live.items())


def _check_no_overlap(pool, capacity):
    end = 0
    for off, size in _intervals(pool):
        assert off >= end, "two live blocks overlap"
        assert off % 64 == 0 and size > 0
        end = off + size
    assert end <= capacity


def _gaps(pool, capacity):
    "Free gaps computed from the live blocks alone (an independent view of the free list)."
    gaps, pos = [], 0
    for off, size in _intervals(pool):
        if off > pos:
            gaps.append((pos, off - pos))
        pos = off + size
    if pos < capacity:
        gaps.append((pos, capacity - pos))
    return gaps


ops = st.lists(st.tuples(st.booleans(), st.integers(1, 3000), st.integers(0, 10_000)),
               min_size=1, max_size=80)


@settings(max_examples=120, deadline=None)
@given(ops, st.sampled_from(["best", "first"]))
def test_free_list_pool_properties(seq, fit):
    cap = 64 * 200
    pool = FreeListPool(cap, fit=fit)
    live = []
    for is_alloc, n, pick in seq:
        if is_alloc or not live:
            size = (n + 63) // 64 * 64
            gaps = _gaps(pool, cap)
            fitting = [g for g in gaps if g[1] >= size]
            try:
                off = pool.alloc(n)
            except AllocationError:
                assert not fitting, "refused although a gap was big enough"
                continue
            want = fitting[0][0] if fit == "first" else min(fitting, key=lambda g: (g[1], g[0]))[0]
            assert off == want
            live.append(off)
        else:
            pool.free(live.pop(pick % len(live)))
        _check_no_overlap(pool, cap)
        assert pool.holes == _gaps(pool, cap)  # holes fully coalesced: exactly the gaps
    for off in live:
        pool.free(off)
    assert pool.holes == [(0, cap)] and pool.used == 0 and pool.fragmentation() == 0


@settings(max_examples=120, deadline=None)
@given(ops)
def test_bump_arena_properties(seq):
    cap = 64 * 300
    pool = BumpArena(cap)
    live = []
    for is_alloc, n, pick in seq:
        if is_alloc or not live:
            top = pool.top
            try:
                off = pool.alloc(n)
            except AllocationError:
                assert top + (n + 63) // 64 * 64 > cap
                continue
            assert off == top
            live.append(off)
        else:
            pool.free(live.pop(pick % len(live)))
        _check_no_overlap(pool, cap)
        assert pool.top == max((o + s for o, s in pool.live.items()), default=0)
    for off in live:
        pool.free(off)
    assert pool.top == 0 and pool.used == 0 and pool.n_live == 0


@settings(max_examples=120, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 1000)), max_size=100))
def test_fixed_slot_pool_properties(seq):
    pool = FixedSlotPool(16, slot_bytes=4096)
    live = set()
    for is_alloc, pick in seq:
        if is_alloc:
            try:
                s = pool.alloc()
            except AllocationError:
                assert len(live) == 16
                continue
            assert s not in live and 0 <= s < 16
            live.add(s)
        elif live:
            s = sorted(live)[pick % len(live)]
            pool.free(s)
            live.remove(s)
        assert pool.n_free == 16 - len(live) and all(pool.is_allocated(s) for s in live)
    for s in list(live):
        pool.free(s)
    assert pool.n_free == pool.capacity == 16


# ---------------------------------------------------------------------------------- pools: errors

@pytest.mark.parametrize("make", [lambda: BumpArena(1024), lambda: FreeListPool(1024)])
def test_double_free_and_unknown_offset(make):
    pool = make()
    off = pool.alloc(10)
    pool.free(off)
    with pytest.raises(AllocationError, match="double free"):
        pool.free(off)
    with pytest.raises(AllocationError, match="offset 12345"):
        pool.free(12345)


def test_exhaustion_messages():
    with pytest.raises(AllocationError, match="bump arena full"):
        BumpArena(128).alloc(200)
    pool = FreeListPool(64 * 4)
    a, b, c, d = (pool.alloc(64) for _ in range(4))
    pool.free(a), pool.free(c)
    with pytest.raises(AllocationError, match="128 bytes free in 2 holes, the largest 64"):
        pool.alloc(100)


def test_fixed_slot_errors_and_alloc_many_is_atomic():
    pool = FixedSlotPool(3)
    assert [pool.alloc(), pool.alloc()] == [0, 1]
    with pytest.raises(AllocationError, match="2 slots requested, 1 of 3 free"):
        pool.alloc_many(2)
    assert pool.n_free == 1                       # nothing taken
    assert pool.alloc_many(1) == [2]
    with pytest.raises(AllocationError, match="all 3 slots"):
        pool.alloc()
    pool.free(1)
    with pytest.raises(AllocationError, match="double free of slot 1"):
        pool.free(1)
    with pytest.raises(AllocationError, match="out of range"):
        pool.free(3)
    pool.reset()
    assert pool.n_free == 3


def test_bump_reset_and_lifo():
    arena = BumpArena(1 << 12)
    a, b, c = arena.alloc(10), arena.alloc(100), arena.alloc(64)
    assert (a, b, c) == (0, 64, 192)
    arena.free(b)                 # a hole in the middle: the top stays
    assert arena.top == 256
    arena.free(c)                 # the top goes, and takes the dead b with it
    assert arena.top == 64
    arena.reset()
    assert arena.top == 0 and arena.n_live == 0


def test_fixed_slot_pool_threads():
    pool = FixedSlotPool(1000)
    got = [[] for _ in range(4)]

    def work(k):
        for _ in range(250):
            got[k].append(pool.alloc())

    ths = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    [t.start() for t in ths]
    [t.join() for t in ths]
    slots = sum(got, [])
    assert sorted(slots) == list(range(1000)) and pool.n_free == 0


# ---------------------------------------------------------------------------------- pool allocator

def test_pool_allocator_serves_tensors_and_takes_them_back(no_gc):
    arena = PoolAllocator(1 << 16, "cpu", pool="best")
    ts = [Tensor.empty((n,), F32, allocator=arena) for n in (100, 300, 50)]
    spans = sorted((t.data_ptr(), t.data_ptr() + t.nbytes) for t in ts)
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
    assert all(arena.backing.ptr <= lo and hi <= arena.backing.ptr + (1 << 16) for lo, hi in spans)
    for i, t in enumerate(ts):
        t.numpy()[:] = i
    assert [t.numpy()[0] for t in ts] == [0, 1, 2]   # no block overwrote another
    del ts, t
    assert arena.pool.n_live == 0 and arena.pool.holes == [(0, 1 << 16)]
    with pytest.raises(AllocationError, match="cannot fit"):
        Tensor.empty((1 << 15,), F32, allocator=arena)


# ---------------------------------------------------------------------------------- lazy CUDA, threads

def test_importing_does_not_import_pycuda():
    import subprocess
    import sys
    code = ("import sys, tffedu.tensor, tffedu.memory, tffedu.device; "
            "t = tffedu.tensor.Tensor.empty((4,), 'F32'); "
            "assert 'pycuda' not in sys.modules and 'pycuda.driver' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_blocks_from_many_threads_get_unique_ids():
    blocks = [[] for _ in range(4)]

    def work(k):
        for _ in range(200):
            blocks[k].append(MemoryBlock(16))

    ths = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    [t.start() for t in ths]
    [t.join() for t in ths]
    ids = [b.id for bs in blocks for b in bs]
    assert len(set(ids)) == 800 and set(ids) <= _live_ids()
    blocks.clear()
    assert not set(ids) & _live_ids()
