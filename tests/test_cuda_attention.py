"""Chapter 12's attention kernels against float64 numpy references (GPU machine; skipped elsewhere).

Flash attention (prefill) and paged decode attention with random shapes: odd lengths, GQA ratios
1, 4 and 8, head dims 64 and 128, page sizes 1, 16 and 32, one split or many. Inputs are drawn in
f16 (what the kernels read), so the reference sees the same values; outputs are poisoned first.
"""
import math
import zlib

import numpy as np
import pytest

from tests.test_cuda_kernels import C, dev, host, poisoned  # noqa: F401  (C: the context fixture)

gpu = pytest.mark.gpu


@pytest.fixture
def rng(request):
    return np.random.default_rng(zlib.crc32(request.node.name.encode()))


@pytest.fixture(scope="module")
def A(C):
    import tffedu.ops.cuda_attention as A
    return A


def attention_ref(q, k, v, causal=True, scale=None, window=0):
    """float64: q [Lq, Hq, D], k/v [Lk, Hkv, D]; causal: query i at position i + Lk - Lq (with a
    window, it sees keys i + Lk - Lq - window + 1 .. i + Lk - Lq)."""
    Lq, Hq, D = q.shape
    Lk, Hkv, _ = k.shape
    scale = 1 / math.sqrt(D) if scale is None else scale
    G = Hq // Hkv
    k = np.repeat(k.astype(np.float64), G, axis=1)                 # kv head of query head h: h // G
    v = np.repeat(v.astype(np.float64), G, axis=1)
    s = np.einsum("qhd,khd->hqk", q.astype(np.float64), k) * scale
    if causal:
        key, pos = np.arange(Lk)[None, :], np.arange(Lq)[:, None] + (Lk - Lq)
        s = np.where((key <= pos) & ((key > pos - window) if window else True), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return np.einsum("hqk,khd->qhd", p, v)


def frob(got, ref):
    return float(np.linalg.norm(got.astype(np.float64) - ref) / np.linalg.norm(ref))


CASES = [(1, 1, True), (17, 17, True), (100, 300, True), (257, 257, True), (130, 77, False),
         (64, 1000, False), (333, 333, True)]


@gpu
@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("G", [1, 4, 8])
@pytest.mark.parametrize("Lq,Lk,causal", CASES)
def test_flash_attention(A, rng, D, G, Lq, Lk, causal):
    Hkv = int(rng.integers(1, 3))
    Hq = G * Hkv
    q = rng.standard_normal((Lq, Hq, D)).astype(np.float16)
    k = rng.standard_normal((Lk, Hkv, D)).astype(np.float16)
    v = rng.standard_normal((Lk, Hkv, D)).astype(np.float16)
    ref = attention_ref(q, k, v, causal)
    for version in (2, 3, 1):
        out = poisoned((Lq, Hq, D))
        A.flash_attention(dev(q), dev(k), dev(v), out=out, causal=causal, version=version)
        assert frob(host(out), ref) < 4e-3, version


@gpu
@pytest.mark.parametrize("W", [1, 5, 64, 100, 700])
@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("Lq,Lk", [(1, 1), (17, 17), (100, 300), (257, 257), (1, 900), (333, 333)])
def test_flash_attention_sliding_window(A, rng, W, D, Lq, Lk):
    """A sliding window (Mistral, Gemma 3): each query sees its last W keys. Versions 1-3 and version
    3's double buffer against float64, GQA 4:1; windows of one key, shorter than a tile, across
    tiles and longer than the sequence; the tiles before a block's window are skipped, not masked."""
    Hkv, G = 2, 4
    q = rng.standard_normal((Lq, G * Hkv, D)).astype(np.float16)
    k = rng.standard_normal((Lk, Hkv, D)).astype(np.float16)
    v = rng.standard_normal((Lk, Hkv, D)).astype(np.float16)
    ref = attention_ref(q, k, v, True, window=W)
    for version, cfg in ((2, None), (3, None), (3, {"version": 3, "KV2": 1, "GRID_HQ": 1}), (1, None)):
        out = poisoned(q.shape)
        A.flash_attention(dev(q), dev(k), dev(v), out=out, window=W, version=None if cfg else version, config=cfg)
        assert frob(host(out), ref) < 4e-3, (version, cfg)
    out = host(A.flash_attention(dev(q), dev(k), dev(v), window=W))        # the default: never version 4
    assert frob(out, ref) < 4e-3
    if W < Lk:
        assert frob(out, attention_ref(q, k, v, True)) > 1e-2             # the window changed the answer
    with pytest.raises(A.ShapeError, match="version 4 has no sliding window"):
        A.flash_attention(dev(q), dev(k), dev(v), window=W, version=4)


@gpu
@pytest.mark.parametrize("cfg", [{"version": 2, "NWARPS": 4, "BC": 64}, {"version": 2, "NWARPS": 4, "BC": 32},
                                 {"version": 2, "NWARPS": 8, "BC": 64}, {"version": 2, "NWARPS": 8, "BC": 32},
                                 {"version": 2, "NWARPS": 4, "BC": 64, "MINB": 3}, {"version": 3, "NWARPS": 4, "BC": 64},
                                 {"version": 3, "NWARPS": 4, "BC": 32}, {"version": 3, "NWARPS": 2, "BC": 64},
                                 {"version": 3, "NWARPS": 2, "BC": 32},
                                 {"version": 2, "NWARPS": 8, "BC": 64, "GRID_HQ": 1},
                                 {"version": 3, "NWARPS": 4, "BC": 64, "GRID_HQ": 1},
                                 {"version": 3, "NWARPS": 4, "BC": 64, "KV2": 1},
                                 {"version": 3, "NWARPS": 4, "BC": 64, "KV2": 1, "GRID_HQ": 1},
                                 {"version": 3, "NWARPS": 4, "BC": 32, "KV2": 1, "GRID_HQ": 1},
                                 {"version": 3, "NWARPS": 2, "BC": 64, "KV2": 1, "GRID_HQ": 1}])
def test_flash_attention_tile_configs(A, rng, cfg):
    q = rng.standard_normal((300, 8, 128)).astype(np.float16)
    k = rng.standard_normal((350, 2, 128)).astype(np.float16)
    v = rng.standard_normal((350, 2, 128)).astype(np.float16)
    out = poisoned(q.shape)
    A.flash_attention(dev(q), dev(k), dev(v), out=out, config=cfg)
    assert frob(host(out), attention_ref(q, k, v)) < 4e-3
    q64 = rng.standard_normal((77, 4, 64)).astype(np.float16)          # head dim 64, odd length
    k64 = rng.standard_normal((90, 1, 64)).astype(np.float16)
    out = poisoned(q64.shape)
    A.flash_attention(dev(q64), dev(k64), dev(k64), out=out, config=cfg)
    assert frob(host(out), attention_ref(q64, k64, k64)) < 4e-3


@gpu
@pytest.mark.parametrize("cfg", [{"version": 3, "KV2": 1}, {"version": 3, "KV2": 1, "GRID_HQ": 1},
                                 {"version": 2, "GRID_HQ": 1}])
@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("Lq,Lk,causal", CASES)
def test_flash_attention_kv2_grid_hq(A, rng, cfg, D, Lq, Lk, causal):
    "The double-buffered K/V (KV2) and heads-first grid (GRID_HQ) switches, odd shapes, GQA 3:1 and batch 2."
    B, Hkv, Hq = 2, 2, 6
    q = rng.standard_normal((B, Lq, Hq, D)).astype(np.float16)
    k = rng.standard_normal((B, Lk, Hkv, D)).astype(np.float16)
    v = rng.standard_normal((B, Lk, Hkv, D)).astype(np.float16)
    out = poisoned(q.shape)
    A.flash_attention(dev(q), dev(k), dev(v), out=out, causal=causal, config=cfg)
    got = host(out)
    for b in range(B):
        assert frob(got[b], attention_ref(q[b], k[b], v[b], causal)) < 4e-3, b


def test_flash_v4_refuses_rings_that_do_not_fit():
    """Version 4's ring must fit a block's shared memory (fewer stages fit with V^T, or with tiles of
    128 keys), and tiles of 128 keys need VT=0: a ShapeError before any GPU work."""
    from tffedu.errors import ShapeError
    from tffedu.ops.cuda_attention import _flash4_launch
    for stages, vt, bn in [(5, 1, 64), (7, 0, 64), (1, 0, 64), (4, 0, 128)]:
        with pytest.raises(ShapeError, match="stages"):
            _flash4_launch(0, 0, 0, 0, 1, 128, 128, 8, 8, 128, 0.1, True, None, stages, 1, None, vt, bn)
    for vt, bn in [(1, 128), (0, 96), (0, 256)]:
        with pytest.raises(ShapeError, match="BN"):
            _flash4_launch(0, 0, 0, 0, 1, 128, 128, 8, 8, 128, 0.1, True, None, 2, 1, None, vt, bn)
    with pytest.raises(ShapeError, match="PINGPONG"):
        _flash4_launch(0, 0, 0, 0, 1, 128, 128, 8, 8, 128, 0.1, True, None, 3, 0, None, 1, 64, 1)


def test_flash_v4_config_is_its_own(monkeypatch):
    """An explicit version 4 starts from its own defaults, not from FLASH (version 3's keys: its
    GRID_HQ=1 once leaked into every explicit version 4 config), and a key it does not know (a typo,
    or version 3's NWARPS) is a ShapeError naming it, before any GPU work."""
    from tffedu.errors import ShapeError
    from tffedu.ops import cuda_attention as ca
    seen = []
    monkeypatch.setattr(ca, "_flash4_launch", lambda *args: seen.append(args[-1]))    # its last: grid_hq
    for version, config in [(4, {"STAGES": 2}), (None, {"version": 4, "STAGES": 2})]:
        ca.flash_launch(0, 0, 0, 0, 1, 128, 128, 8, 8, 128, None, True, None, version, config)
    assert seen == [0, 0]
    monkeypatch.undo()
    for bad in ({"NWARPS": 4}, {"PINGPNG": 1}):
        with pytest.raises(ShapeError, match=next(iter(bad))):
            ca.flash_launch(0, 0, 0, 0, 1, 128, 128, 8, 8, 128, None, True, None, 4, bad)


V4_CONFIGS = [dict(STAGES=3), dict(STAGES=4), dict(STAGES=3, OVERLAP=0), dict(STAGES=3, PINGPONG=1),
              dict(STAGES=4, VT=0), dict(STAGES=6, VT=0), dict(STAGES=4, VT=0, OVERLAP=0),
              dict(STAGES=2, VT=0, BN=128), dict(STAGES=3, VT=0, BN=128), dict(STAGES=2, VT=0, BN=128, OVERLAP=0),
              dict(STAGES=2, VT=0, BN=128, PINGPONG=1), dict(STAGES=2, VT=0, BN=128, PINGPONG=1, GRID_HQ=1)]


@gpu
@pytest.mark.parametrize("cfg", V4_CONFIGS, ids=lambda c: "-".join(f"{k}{v}" for k, v in c.items()))
@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("Lq,Lk,causal", CASES + [(1030, 1030, True), (200, 1500, True)])
def test_flash_attention_v4(A, rng, cfg, D, Lq, Lk, causal):
    """Version 4 (wgmma, TMA; V^T transposed in shared memory, or with VT=0 V read MN-major as it
    lands, in tiles of 64 or 128 keys; the consumer warpgroups' turns with PINGPONG) on odd shapes,
    GQA 3:1 and batch 2 (a tile of the first sequence reads the next one's rows: masked), against
    float64."""
    from tffedu.ops.cuda_gemm import wgmma_available
    if not wgmma_available():
        pytest.skip("version 4 needs an sm_90 GPU")
    B, Hkv, Hq = 2, 2, 6
    q = rng.standard_normal((B, Lq, Hq, D)).astype(np.float16)
    k = rng.standard_normal((B, Lk, Hkv, D)).astype(np.float16)
    v = rng.standard_normal((B, Lk, Hkv, D)).astype(np.float16)
    out = poisoned(q.shape)
    A.flash_attention(dev(q), dev(k), dev(v), out=out, causal=causal, version=4,
                      config=cfg)
    got = host(out)
    for b in range(B):
        assert frob(got[b], attention_ref(q[b], k[b], v[b], causal)) < 4e-3, b
    from tffedu.errors import ShapeError
    with pytest.raises(ShapeError, match="version 4"):
        A.flash_attention(dev(q[..., :32].copy()), dev(k[..., :32].copy()), dev(v[..., :32].copy()), causal=causal,
                          version=4)


def paged_prefill_matches(ps):
    "`paged_attention_varlen` prefill steps (padding, cached prefixes, GQA, head dims 64 and 128) against float64."
    from tffedu.factory import OPS
    from tests.test_op_contract import host as host_, paged_batch, rel, to_device, varlen_ref
    for spec, Hq, Hkv, D in [(dict(chunks=[5, 1, 9], starts=[0, 12, 33], pad_rows=1, pad_seqs=1), 8, 2, 128),
                             (dict(chunks=[200, 100], starts=[0, 50], pad_rows=3), 32, 8, 128),
                             (dict(chunks=[17, 3], starts=[0, 0]), 8, 1, 64)]:
        args, _ = paged_batch(Hq=Hq, Hkv=Hkv, D=D, page_size=ps, **spec)
        got = host_(OPS.get("paged_attention_varlen", "cuda")(*[to_device(a) for a in args]))
        assert rel(got, varlen_ref(args, {})[0]) < 3e-3, spec


@gpu
@pytest.mark.parametrize("cfg", [dict(STAGES=3), dict(STAGES=3, OVERLAP=0), dict(STAGES=3, VT=0),
                                 dict(STAGES=2, VT=0, BN=128), dict(STAGES=2, VT=0, BN=128, PINGPONG=1),
                                 dict(STAGES=2, VT=0, BN=128, PINGPONG=1, GRID_HQ=1)],
                         ids=lambda c: "-".join(f"{k}{v}" for k, v in c.items()))
@pytest.mark.parametrize("ps", [8, 16, 32, 64])
def test_paged_prefill_v4(monkeypatch, ps, cfg):
    """The engine's prefill attention (`paged_attention_varlen`) on version 4's PAGED mode: padded
    steps of several sequences, cached tokens before the new ones, GQA, head dims 64 and 128, one TMA
    box per page; against float64 through the page tables."""
    from tffedu.ops import cuda_attention as ca
    from tffedu.ops.cuda_gemm import wgmma_available
    if not wgmma_available():
        pytest.skip("version 4 needs an sm_90 GPU")
    for name in ("FLASH", "FLASH_SMALL", "FLASH_HOPPER"):
        monkeypatch.setattr(ca, name, {"version": 4, **cfg})
    paged_prefill_matches(ps)


@gpu
@pytest.mark.parametrize("ps", [1, 16, 32])
def test_paged_prefill_v2_v3(monkeypatch, ps):
    """The engine's prefill attention with `FLASH_HOPPER` off: versions 2 / 3 in their PAGED mode, the
    path of every GPU but an sm_90 one (and of other head dims), against float64."""
    from tffedu.ops import cuda_attention as ca
    monkeypatch.setattr(ca, "FLASH_HOPPER", None)
    paged_prefill_matches(ps)


@gpu
@pytest.mark.parametrize("flash", [None, {"version": 4}, {"version": 4, "VT": 0, "BN": 128, "STAGES": 2}],
                         ids=["v2-v3", "v4", "v4-BN128"])
@pytest.mark.parametrize("D", [128, 256])
def test_paged_attention_survives_hostile_tables(monkeypatch, flash, D):
    """Page ids past the pool, negative or huge, lengths past the table or below 0, and cu_seqlens
    out of order or past N: a captured step cannot read them back to check them, so the kernels
    must never read outside the pages or write outside the step. Every call returns finite values
    (or, where lengths are read back anyway, a ShapeError), and the context still answers a valid
    batch right afterwards."""
    from tffedu.errors import ShapeError
    from tffedu.factory import OPS
    from tffedu.ops import cuda_attention as ca
    from tffedu.ops.cuda_gemm import wgmma_available
    from tests.test_op_contract import host as host_, paged_batch, rel, to_device, varlen_ref
    if flash is not None:
        if not wgmma_available() or D != 128:
            pytest.skip("version 4: an sm_90 GPU, head dim 128")
        for name in ("FLASH", "FLASH_SMALL", "FLASH_HOPPER"):
            monkeypatch.setattr(ca, name, flash)
    else:
        monkeypatch.setattr(ca, "FLASH_HOPPER", None)               # versions 2 / 3 (version 4 is the default)
    varlen = OPS.get("paged_attention_varlen", "cuda")
    args, _ = paged_batch(chunks=[5, 9], starts=[3, 20], Hq=8, Hkv=2, D=D, page_size=16)
    P, max_pages = args[3].shape[0], args[6].shape[1]
    tables = args[6].copy()
    tables[0, 0], tables[1, 0], tables[1, 1] = P + 5, -7, 2**31 - 1
    hostile = [(6, tables), (7, np.array([10**9, -5], np.int32)), (7, np.array([2**31 - 1, 2**31 - 1], np.int32)),
               (8, np.array([0, 10**6, -3], np.int32)), (8, np.array([5, 2, 14], np.int32))]
    for decode in (False, True):
        for i, bad in hostile:
            a = list(args)
            a[i] = bad
            if decode:                       # one row per sequence: each sequence's last row
                rows = np.array([4, 13])
                a[0], a[1], a[2], a[5], a[9] = (x[rows] for x in (a[0], a[1], a[2], a[5], a[9]))
                a[8] = np.arange(3, dtype=np.int32) if i != 8 else bad
            try:
                got = host_(varlen(*[to_device(x) for x in a], decode=decode))
            except ShapeError:
                continue
            assert np.isfinite(got).all(), (decode, i)
    got = host_(OPS.get("paged_attention", "cuda")(to_device(args[0][:5]), to_device(args[3]), to_device(args[4]),
                                                   to_device(tables[0]), 8))
    assert np.isfinite(got).all()
    got = host_(varlen(*[to_device(x) for x in args]))       # the context is alive and right
    assert rel(got, varlen_ref(args, {})[0]) < 3e-3


@gpu
@pytest.mark.parametrize("D", [40, 256])
def test_attention_head_dims_past_flash(A, rng, D):
    """Head dims the flash kernels do not take (not a multiple of 16, or past 128) run the naive
    kernel, which compiles without them: against float64, causal, GQA 2:1, Lk > Lq."""
    Lq, Lk, Hq, Hkv = 37, 50, 4, 2
    q = rng.standard_normal((1, Lq, Hq, D)).astype(np.float16)
    k = rng.standard_normal((1, Lk, Hkv, D)).astype(np.float16)
    v = rng.standard_normal((1, Lk, Hkv, D)).astype(np.float16)
    out = poisoned(q.shape)
    A.flash_attention(dev(q), dev(k), dev(v), out=out, causal=True)
    assert frob(host(out)[0], attention_ref(q[0], k[0], v[0], True)) < 4e-3


@gpu
def test_flash_attention_batched_f32_and_scale(A, rng):
    B, L, Hq, Hkv, D = 3, 70, 8, 2, 64
    q = rng.standard_normal((B, L, Hq, D)).astype(np.float32)
    k = rng.standard_normal((B, L, Hkv, D)).astype(np.float32)
    v = rng.standard_normal((B, L, Hkv, D)).astype(np.float32)
    for version in (2, 3):
        out = host(A.flash_attention(dev(q), dev(k), dev(v), scale=0.3, version=version))
        for b in range(B):
            ref = attention_ref(q[b].astype(np.float16), k[b].astype(np.float16), v[b].astype(np.float16), scale=0.3)
            assert frob(out[b], ref) < 4e-3, (version, b)


@gpu
def test_attention_op_matches_torch_sdpa(A, rng):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    import torch.nn.functional as F
    L, Hq, Hkv, D = 517, 32, 8, 128
    q = rng.standard_normal((L, Hq, D)).astype(np.float16)
    k = rng.standard_normal((L, Hkv, D)).astype(np.float16)
    v = rng.standard_normal((L, Hkv, D)).astype(np.float16)
    from tffedu.factory import OPS
    out = host(OPS.get("attention", "cuda")(dev(q), dev(k), dev(v)))
    t = lambda a: torch.from_numpy(a).cuda().transpose(0, 1).unsqueeze(0)  # noqa: E731
    ref = F.scaled_dot_product_attention(t(q), t(k).repeat_interleave(4, 1), t(v).repeat_interleave(4, 1),
                                         is_causal=True)[0].transpose(0, 1).float().cpu().numpy()
    assert frob(out, ref) < 4e-3


@gpu
def test_attention_shape_errors(A, rng):
    from tffedu.errors import ShapeError
    q = dev(np.zeros((4, 6, 64), np.float16))
    k = dev(np.zeros((4, 4, 64), np.float16))
    with pytest.raises(ShapeError, match="Hq % Hkv"):
        A.flash_attention(q, k, k)
    with pytest.raises(ShapeError, match="Lk >= Lq"):
        A.flash_attention(dev(np.zeros((9, 4, 64), np.float16)), k, k)


# ---------------------------------------------------------------- paged decode
def make_cache(B, Hq, Hkv, D, ps, lens, rng):
    need = [-(-int(L) // ps) for L in lens]
    P = sum(need) + 2
    kp = rng.standard_normal((P, ps, Hkv, D), dtype=np.float32).astype(np.float16)
    vp = rng.standard_normal((P, ps, Hkv, D), dtype=np.float32).astype(np.float16)
    perm = rng.permutation(P)
    tables = np.full((B, max(need) + 1), -1, np.int32)            # padded with -1, one spare column
    used = 0
    for b, n in enumerate(need):
        tables[b, :n] = perm[used:used + n]
        used += n
    q = rng.standard_normal((B, Hq, D)).astype(np.float32)
    return q, kp, vp, tables, np.asarray(lens, np.int32)


def decode_ref(q, kp, vp, tables, lens):
    ps = kp.shape[1]
    out = np.zeros(q.shape)
    for b, L in enumerate(lens):
        t = np.arange(L)
        k, v = kp[tables[b][t // ps], t % ps], vp[tables[b][t // ps], t % ps]
        out[b] = attention_ref(q[b:b + 1], k, v, causal=True)[0]
    return out


@gpu
@pytest.mark.parametrize("ps", [1, 16, 32])
@pytest.mark.parametrize("G", [1, 4, 8])
@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("splits", [None, 1, 5])
def test_paged_decode(A, rng, ps, G, D, splits):
    "Default decode config (A.DECODE), every page size / GQA ratio / head dim / split count."
    Hkv = int(rng.integers(1, 3))
    lens = [1, int(rng.integers(2, 40)), int(rng.integers(200, 1500))]
    q, kp, vp, tab, ln = make_cache(3, G * Hkv, Hkv, D, ps, lens, rng)
    out = poisoned(q.shape)
    A.paged_attention_decode(dev(q), dev(kp), dev(vp), dev(tab), dev(ln), out=out, n_splits=splits,
                             max_seq_len=None if splits else max(lens))
    assert frob(host(out), decode_ref(q, kp, vp, tab, ln)) < 2e-5


@gpu
@pytest.mark.parametrize("cfg", [{"NWARPS": 2, "UNROLL": 1}, {"NWARPS": 8, "UNROLL": 2}, {"NWARPS": 4, "UNROLL": 8},
                                 {"NWARPS": 8, "UNROLL": 8}, {"NWARPS": 4, "UNROLL": 2}, {"NWARPS": 8, "UNROLL": 4}])
def test_paged_decode_configs_long(A, rng, cfg):
    q, kp, vp, tab, ln = make_cache(2, 16, 2, 128, 32, [9000, 4097], rng)
    out = poisoned(q.shape)
    A.paged_attention_decode(dev(q), dev(kp), dev(vp), dev(tab), dev(ln), out=out, config=cfg)
    assert frob(host(out), decode_ref(q, kp, vp, tab, ln)) < 2e-5


@gpu
@pytest.mark.parametrize("D", [8, 16, 32, 128, 256])
def test_paged_decode_mostly_empty_splits(A, rng, D):
    """Splits sized for a table far longer than the sequences (as a bucketed step's are): the
    blocks of empty splits return at once and the merge reads only the splits that hold keys;
    every head dim the kernel takes (the merge's shuffles run over D < 32 lanes too)."""
    lens = [1, 129, 700]
    q, kp, vp, tab, ln = make_cache(3, 4, 2, D, 16, lens, rng)
    wide = np.full((3, 128), -1, np.int32)                        # room for 2048 tokens each
    wide[:, :tab.shape[1]] = tab
    for splits in (None, 64):                                     # chosen (one per 64 keys), and 64 of 32 keys
        out = poisoned(q.shape)
        A.paged_attention_decode(dev(q), dev(kp), dev(vp), dev(wide), dev(ln), out=out, n_splits=splits)
        assert frob(host(out), decode_ref(q, kp, vp, tab, ln)) < 2e-5



@gpu
@pytest.mark.parametrize("max_splits", [0, 1, 3, 32])
def test_varlen_decode_splits_scale_with_each_sequence(A, rng, monkeypatch, max_splits):
    """The engine's decode (`paged_attention_varlen`, decode=True) cuts each sequence into at most
    VARLEN_MAX_SPLITS splits of a multiple of VARLEN_SPLIT keys, from its own length (0: fixed splits):
    right against float64 for lengths of one split, a few and many, and a sequence decoded alone in a
    table of another width gives the same bits as in the batch. `paged_attention_decode` whose
    max_seq_len undershoots the lengths still reads every key (its splits grow, the grid stays)."""
    from tffedu.factory import OPS
    monkeypatch.setattr(A, "VARLEN_SPLIT", 16)
    monkeypatch.setattr(A, "VARLEN_MAX_SPLITS", max_splits)
    lens = [1, 16, 17, 130, 700, 2500]
    B, Hkv, G, D, ps = len(lens), 2, 4, 128, 16
    q, kp, vp, tab, ln = make_cache(B, G * Hkv, Hkv, D, ps, lens, rng)
    want = decode_ref(q, kp, vp, tab, ln)
    varlen = OPS.get("paged_attention_varlen", "cuda")

    def decode(rows, table):
        n = len(rows)
        kv = np.zeros((n, Hkv, D), np.float32)                  # slots -1: this step stores nothing
        return host(varlen(dev(q[rows]), dev(kv), dev(kv), dev(kp), dev(vp), dev(np.full(n, -1, np.int32)),
                           dev(table), dev(ln[rows]), dev(np.arange(n + 1, dtype=np.int32)),
                           dev(ln[rows] - 1), decode=True))
    got = decode(np.arange(B), tab)
    assert frob(got, want) < 2e-5
    for b in (3, 5):                                            # alone, in a table 3x as wide
        wide = np.full((1, 3 * tab.shape[1]), -1, np.int32)
        wide[0, :tab.shape[1]] = tab[b]
        assert np.array_equal(decode(np.array([b]), wide)[0], got[b]), b
    out = poisoned(q.shape)
    A.paged_attention_decode(dev(q), dev(kp), dev(vp), dev(tab), dev(ln), out=out, max_seq_len=100)
    assert frob(host(out), want) < 2e-5


@gpu
def test_decode_merge_counters_on_streams(A, rng):
    """The last split of each (sequence, kv head) merges, counted in per-stream counters that every
    launch leaves at zero: two streams decoding different batches at once (each its own counters, its
    own scratch) both match the reference, again and again, and the counters end at zero."""
    import pycuda.driver as drv
    from tffedu.tensor import I8, Tensor
    cases = [make_cache(3, 8, 2, 128, 16, [1500, 7, 3000], rng), make_cache(2, 16, 4, 64, 32, [4000, 900], rng)]
    streams = [drv.Stream(), drv.Stream()]
    args = [[dev(x) for x in c] for c in cases]
    outs = [poisoned(c[0].shape) for c in cases]
    ws = [Tensor.empty((8 << 20,), I8, "cuda") for _ in cases]
    for _ in range(3):
        for a, o, s, w in zip(args, outs, streams, ws):
            A.paged_attention_decode(*a, out=o, stream=s, workspace=w, n_splits=24)
        for c, o, s in zip(cases, outs, streams):
            s.synchronize()
            assert frob(host(o), decode_ref(*c)) < 2e-5
    for s in streams:
        assert all(not host(t).any() for t in A._COUNTERS[int(s.handle)])


@gpu
@pytest.mark.parametrize("T,Hq,Hk,Dh,n_dims", [(1, 32, 8, 128, None), (3, 4, 2, 64, 48), (5, 2, 1, 32, None)])
def test_qk_norm_rope_store_is_the_pair_and_kv_store(A, C, rng, T, Hq, Hk, Dh, n_dims):
    """One launch = qk_norm_rope_pair, then kv_store of its rotated k and of v: the output and the
    pages to the bit; a padding row (slot -1) and a slot past the pages are not stored."""
    from tffedu.errors import ShapeError
    q, k, v = (rng.standard_normal((T, H, Dh)).astype(np.float32) * 3 for H in (Hq, Hk, Hk))
    wq, wk = ((1 + 0.3 * rng.standard_normal(Dh)).astype(np.float32) for _ in range(2))
    pos = rng.integers(0, 5000, T).astype(np.int32)
    P, ps = 4, 4
    slots = rng.choice(P * ps, T, replace=False).astype(np.int32)
    slots[-1] = -1 if T > 1 else slots[-1]
    if T > 2:
        slots[0] = P * ps                                         # past the pages: not stored either
    kw = dict(eps=1e-6, theta=1e6, mode="neox", n_dims=n_dims)
    pages = [rng.standard_normal((P, ps, Hk, Dh)).astype(np.float16) for _ in range(2)]
    kp, vp, kp2, vp2 = (dev(x) for x in pages + pages)
    got = host(A.qk_norm_rope_store(dev(q), dev(k), dev(v), dev(wq), dev(wk), dev(pos), kp, vp, dev(slots), **kw))
    want = host(C.qk_norm_rope_pair(dev(q), dev(k), dev(wq), dev(wk), dev(pos), **kw))
    assert np.array_equal(got, want)
    A.kv_store(dev(want[T * Hq * Dh:].reshape(T, Hk, Dh)), dev(v), kp2, vp2, dev(slots))
    assert np.array_equal(host(kp), host(kp2)) and np.array_equal(host(vp), host(vp2))
    if T > 1:                                                     # the padding rows left the pages alone
        untouched = np.setdiff1d(np.arange(P * ps), slots[(slots >= 0) & (slots < P * ps)])
        assert np.array_equal(host(kp).reshape(P * ps, Hk, Dh)[untouched],
                              pages[0].reshape(P * ps, Hk, Dh)[untouched])
    with pytest.raises(ShapeError, match="does not fit pages"):
        A.qk_norm_rope_store(dev(q), dev(k), dev(v), dev(wq), dev(wk), dev(pos),
                             dev(pages[0][..., :Dh // 2].copy()), dev(pages[1][..., :Dh // 2].copy()), dev(slots), **kw)


@gpu
@pytest.mark.parametrize("cache", ["F16", "F32"])
def test_slot_writers_stay_inside_the_pool(A, rng, cache):
    """Hostile slots (past the pool, INT_MAX, negative, INT_MIN) fed to every kernel that writes
    through them, kv_store and qk_norm_rope_store: the pool is a view into a bigger allocation with a
    guard page on each side, and the guards come back unchanged to the bit while the good slots are
    written (a write one row outside the pool would land in a guard)."""
    P, ps, Hk, Dh, Hq = 6, 4, 2, 64, 4
    n = P * ps
    bad = np.array([n, n + 1, 2**31 - 1, -1, -2, -(2**31), 10 * n], np.int32)
    good = rng.choice(n, 5, replace=False).astype(np.int32)
    slots = rng.permutation(np.concatenate([bad, good])).astype(np.int32)
    T = len(slots)
    k, v = (rng.standard_normal((T, Hk, Dh)).astype(np.float32) for _ in range(2))
    npdt = np.float16 if cache == "F16" else np.float32
    before = [rng.standard_normal((P + 2, ps, Hk, Dh)).astype(npdt) for _ in range(2)]

    def pools():
        big = [dev(b) for b in before]
        return big, [b[1:P + 1] for b in big]                   # the pool, between two guard pages

    def check(big, k_rows):
        for b, want_rows, src in zip(big, k_rows, before):
            got = host(b)
            assert np.array_equal(got[0], src[0]) and np.array_equal(got[P + 1], src[P + 1]), "a guard page changed"
            inner = got[1:P + 1].reshape(n, Hk, Dh)
            for t in np.flatnonzero((slots >= 0) & (slots < n)):
                np.testing.assert_allclose(inner[slots[t]].astype(np.float32), want_rows[t], rtol=1e-3, atol=1e-3)

    big, (kp, vp) = pools()
    A.kv_store(dev(k), dev(v), kp, vp, dev(slots))
    check(big, (k, v))
    if cache == "F16":                                            # the fused rotation stores f16 pages only
        q = rng.standard_normal((T, Hq, Dh)).astype(np.float32)
        wq, wk = (np.ones(Dh, np.float32) for _ in range(2))
        pos = np.arange(T, dtype=np.int32)
        big, (kp, vp) = pools()
        out = host(A.qk_norm_rope_store(dev(q), dev(k), dev(v), dev(wq), dev(wk), dev(pos), kp, vp, dev(slots)))
        check(big, (out[T * Hq * Dh:].reshape(T, Hk, Dh), v))


@gpu
@pytest.mark.parametrize("ps", [1, 16, 32])
def test_kv_store_then_paged_prefill(A, rng, ps):
    Hq, Hkv, D, T0, T = 8, 2, 64, 37, 21                       # 37 cached tokens, 21 new ones
    L = T0 + T
    P = -(-L // ps) + 3
    kp = dev(np.zeros((P, ps, Hkv, D), np.float16))
    vp = dev(np.zeros((P, ps, Hkv, D), np.float16))
    table = rng.permutation(P)[: -(-L // ps)].astype(np.int32)
    k = rng.standard_normal((L, Hkv, D)).astype(np.float32)
    v = rng.standard_normal((L, Hkv, D)).astype(np.float32)
    t = np.arange(L)
    slots = (table[t // ps] * ps + t % ps).astype(np.int32)
    A.kv_store(dev(k[:T0]), dev(v[:T0]), kp, vp, dev(slots[:T0]))
    A.kv_store(dev(k[T0:]), dev(v[T0:]), kp, vp, dev(slots[T0:]))
    kh = host(kp)
    assert np.array_equal(kh[table[t // ps], t % ps], k.astype(np.float16))
    q = rng.standard_normal((T, Hq, D)).astype(np.float32)
    out = poisoned((T, Hq, D))
    A.paged_attention(dev(q), kp, vp, dev(table), L, out=out)
    ref = attention_ref(q.astype(np.float16), k.astype(np.float16), v.astype(np.float16))
    assert frob(host(out), ref) < 4e-3


def test_a_window_is_an_integer_of_zero_or_more():
    "The launchers' `window` attribute (any machine: checked before a kernel is named)."
    from tffedu.errors import ShapeError
    from tffedu.ops.cuda_attention import sliding_window
    assert sliding_window(0) == 0 and sliding_window(np.int64(4096)) == 4096
    for bad in (-1, 1.5, True, "4", None):
        with pytest.raises(ShapeError, match="window must be an integer"):
            sliding_window(bad)
