"""8-bit K/V pages on the GPU (issue 35): chapter 12's kernels over Q8_0 pages.

Oracles, none of them ours: the pages' bytes against gguf-py's Q8_0 quantizer (the same rounding,
bit for bit); the attention ops against chapter 09's numpy ops over the same bytes, and against the
f16 kernels over gguf-py's dequantization of them (hostile page tables included); whole models
against HF float32 attending over K/V rounded through gguf-py's Q8_0 (`hf_q8_kv`, as test_kv8 does
on the CPU). GPU machine only (skipped elsewhere).
"""
import numpy as np
import pytest
from gguf import GGMLQuantizationType as QT
from gguf.quants import dequantize as gguf_dequantize, quantize as gguf_quantize

from hf_models import hf_logits, hf_q8_kv, rel_err, tiny_gemma3, tiny_llama, tiny_mistral, tiny_qwen3, write_gguf

pytestmark = pytest.mark.gpu


def dev(a, dtype=None):
    from tffedu.tensor import Tensor
    return Tensor.from_numpy(np.ascontiguousarray(a), dtype).to("cuda")


def host(t):
    return np.asarray(t.to("cpu").numpy())


def op(name):
    import tffedu.ops.cuda as C
    from tffedu.factory import OPS
    C.context()
    return OPS.get(name, "cuda")


def cpu_op(name):
    from tffedu.factory import OPS
    return OPS.get(name, "cpu")


def q8_pages(P, ps, Hkv, D, rng, scale=1.0):
    "Random K/V rows as Q8_0 page bytes [P, ps, Hkv, D / 32 * 34] (gguf-py's quantizer)."
    x = (rng.standard_normal((P, ps, Hkv, D)) * scale).astype(np.float32)
    return gguf_quantize(x, QT.Q8_0)


def q8_dev(b):
    from tffedu.tensor import Q8_0
    return dev(b, Q8_0)


def f16_of(b):
    "gguf-py's dequantization of page bytes, as f16 pages."
    return gguf_dequantize(b, QT.Q8_0).astype(np.float16)


# ---------------------------------------------------------------------------------------------
# the store: every kernel that writes pages writes gguf-py's bytes

@pytest.mark.parametrize("Hkv,D", [(2, 64), (8, 128), (1, 32), (4, 256)])
def test_kv_store_writes_gguf_pys_blocks(Hkv, D):
    rng = np.random.default_rng(D)
    P, ps, T = 5, 4, 9
    k, v = rng.standard_normal((2, T, Hkv, D)).astype(np.float32)
    k[1] = 0                                          # an all-zero block: d = 0, codes 0
    k[2] *= 1e4
    v[3, 0, :32] = np.arange(32) - 15.5               # a ramp: every code from -127 to 127 in steps
    slots = np.array([0, 7, 19, -1, 3, P * ps, 12, 1, 2 ** 30], np.int32)   # a padding row, two past the pages
    kp, vp = q8_dev(np.zeros((P, ps, Hkv, D // 32 * 34), np.uint8)), q8_dev(np.zeros((P, ps, Hkv, D // 32 * 34), np.uint8))
    op("kv_store")(dev(k), dev(v), kp, vp, dev(slots))
    want_k, want_v = np.zeros((P * ps, Hkv, D // 32 * 34), np.uint8), np.zeros((P * ps, Hkv, D // 32 * 34), np.uint8)
    live = (slots >= 0) & (slots < P * ps)
    want_k[slots[live]] = gguf_quantize(k[live], QT.Q8_0)
    want_v[slots[live]] = gguf_quantize(v[live], QT.Q8_0)
    np.testing.assert_array_equal(host(kp).reshape(want_k.shape), want_k)
    np.testing.assert_array_equal(host(vp).reshape(want_v.shape), want_v)


@pytest.mark.parametrize("Hq,Hk,D", [(8, 2, 128), (4, 4, 64), (16, 8, 32)])
def test_the_fused_rope_store_writes_the_rotated_k_as_q8_0(Hq, Hk, D):
    "qk_norm_rope_store over Q8_0 pages: its q/k output as over f16 pages, and the pages gguf-py's blocks of it."
    rng = np.random.default_rng(Hq)
    T, P, ps = 3, 4, 8
    q, k = rng.standard_normal((T, Hq, D)).astype(np.float32), rng.standard_normal((T, Hk, D)).astype(np.float32)
    v = rng.standard_normal((T, Hk, D)).astype(np.float32)
    wq, wk = (1 + 0.1 * rng.standard_normal((2, D))).astype(np.float32)
    pos, slots = np.array([5, 17, 30], np.int32), np.array([3, -1, 29], np.int32)
    kp, vp = (q8_dev(np.zeros((P, ps, Hk, D // 32 * 34), np.uint8)) for _ in range(2))
    f16 = [dev(np.zeros((P, ps, Hk, D), np.float16)) for _ in range(2)]
    args = dict(eps=1e-6, theta=1e6)
    y8 = host(op("qk_norm_rope_store")(dev(q), dev(k), dev(v), dev(wq), dev(wk), dev(pos), kp, vp, dev(slots), **args))
    y16 = host(op("qk_norm_rope_store")(dev(q), dev(k), dev(v), dev(wq), dev(wk), dev(pos), *f16, dev(slots), **args))
    np.testing.assert_array_equal(y8, y16)
    k_rot = y8[T * Hq * D:].reshape(T, Hk, D)
    got_k, got_v = host(kp).reshape(P * ps, Hk, -1), host(vp).reshape(P * ps, Hk, -1)
    for t, s in enumerate(slots):
        if s >= 0:
            np.testing.assert_array_equal(got_k[s], gguf_quantize(k_rot[t], QT.Q8_0))
            np.testing.assert_array_equal(got_v[s], gguf_quantize(v[t], QT.Q8_0))
    untouched = np.setdiff1d(np.arange(P * ps), slots)
    assert not got_k[untouched].any() and not got_v[untouched].any()


# ---------------------------------------------------------------------------------------------
# decode and prefill attention over 8-bit pages

SHAPES = [  # (Hq, Hkv, D, page_size): the decode kernel's head dims (D / 8 lanes a power of two)
    (8, 2, 64, 16), (32, 8, 128, 16), (4, 4, 128, 1), (16, 2, 256, 32), (8, 1, 32, 3)]


def batch(rng, P, ps, lens, max_pages):
    "Page tables int32 [B, max_pages] of sequences of these lengths over a shuffled pool of P pages (-1 past each)."
    ids = rng.permutation(P)
    tables, used = np.full((len(lens), max_pages), -1, np.int32), 0
    for b, n in enumerate(lens):
        need = -(-n // ps)
        tables[b, :need] = ids[used:used + need]
        used += need
    return tables


@pytest.mark.parametrize("Hq,Hkv,D,ps", SHAPES)
@pytest.mark.parametrize("window", [0, 37])
def test_decode_over_q8_0_pages_is_the_numpy_op(Hq, Hkv, D, ps, window):
    "A decode step (store, then attend) over Q8_0 pages: chapter 09's numpy op over the same bytes."
    rng = np.random.default_rng(D + ps + window)
    lens = np.array([1, 700, 129], np.int32)
    max_pages = -(-700 // ps) + 1
    P = sum(-(-n // ps) for n in lens) + 3
    tables = batch(rng, P, ps, lens, max_pages)
    kb, vb = q8_pages(P, ps, Hkv, D, rng), q8_pages(P, ps, Hkv, D, rng, 3.0)
    B = len(lens)
    q, k, v = (rng.standard_normal((B, H, D)).astype(np.float32) for H in (Hq, Hkv, Hkv))
    slots = np.array([tables[b, (n - 1) // ps] * ps + (n - 1) % ps for b, n in enumerate(lens)], np.int32)
    cu, pos = np.arange(B + 1, dtype=np.int32), lens - 1
    ref_k, ref_v = kb.copy(), vb.copy()
    ref = cpu_op("paged_attention_varlen")(q, k, v, ref_k, ref_v, slots, tables, lens, cu, pos, decode=True,
                                           window=window, kv_dtype="Q8_0")
    kp, vp = q8_dev(kb), q8_dev(vb)
    got = op("paged_attention_varlen")(dev(q), dev(k), dev(v), kp, vp, dev(slots), dev(tables), dev(lens), dev(cu),
                                       dev(pos), decode=True, window=window, kv_dtype="Q8_0")
    np.testing.assert_array_equal(host(kp).reshape(ref_k.shape), ref_k)    # the store: the numpy op's bytes
    np.testing.assert_allclose(host(got), ref, atol=2e-3, rtol=1e-3)


@pytest.mark.parametrize("Hq,Hkv,D,ps", SHAPES[:3])
def test_hostile_tables_read_as_the_f16_kernel_reads_them(Hq, Hkv, D, ps):
    """Ids past the pool, -1 holes, lengths past the table or below zero: the Q8_0 kernel reads what
    the f16 kernel reads over gguf-py's dequantization of the same pages (zeros where there is no page)."""
    rng = np.random.default_rng(ps)
    P, max_pages, B = 12, 6, 5
    kb, vb = q8_pages(P, ps, Hkv, D, rng), q8_pages(P, ps, Hkv, D, rng)
    tables = rng.integers(0, P, (B, max_pages)).astype(np.int32)
    tables[0, 2] = -1
    tables[1, :] = [P, 2 ** 31 - 1, -7, 3, 0, P + 1]
    lens = np.array([max_pages * ps, max_pages * ps * 50, -4, 0, 2 * ps + 1], np.int32)
    q = rng.standard_normal((B, Hq, D)).astype(np.float32)
    got = op("paged_attention_decode")(dev(q), q8_dev(kb), q8_dev(vb), dev(tables), dev(lens))
    ref = op("paged_attention_decode")(dev(q), dev(f16_of(kb)), dev(f16_of(vb)), dev(tables), dev(lens))
    np.testing.assert_allclose(host(got), host(ref), atol=2e-3, rtol=1e-3)


@pytest.mark.parametrize("Hq,Hkv,D,ps", SHAPES + [(12, 2, 96, 5)])
def test_prefill_over_q8_0_pages_is_the_numpy_op(Hq, Hkv, D, ps):
    """A step of three sequences, two with cached prefixes, over Q8_0 pages: flash reads them as f16
    pages (D <= 128), a larger head sequence by sequence through gather_kv."""
    rng = np.random.default_rng(D * ps)
    starts, chunks = np.array([0, 90, 300], np.int32), np.array([17, 40, 5], np.int32)
    lens = starts + chunks
    max_pages = -(-int(lens.max()) // ps) + 1
    P = sum(-(-int(n) // ps) for n in lens) + 2
    tables = batch(rng, P, ps, lens, max_pages)
    kb, vb = q8_pages(P, ps, Hkv, D, rng), q8_pages(P, ps, Hkv, D, rng)
    N, B = int(chunks.sum()), len(lens)
    q, k, v = (rng.standard_normal((N, H, D)).astype(np.float32) for H in (Hq, Hkv, Hkv))
    pos = np.concatenate([np.arange(s, s + c) for s, c in zip(starts, chunks)]).astype(np.int32)
    seq = np.repeat(np.arange(B), chunks)
    slots = (tables[seq, pos // ps] * ps + pos % ps).astype(np.int32)
    cu = np.concatenate([[0], np.cumsum(chunks)]).astype(np.int32)
    ref_k, ref_v = kb.copy(), vb.copy()
    ref = cpu_op("paged_attention_varlen")(q, k, v, ref_k, ref_v, slots, tables, lens, cu, pos, kv_dtype="Q8_0")
    kp, vp = q8_dev(kb), q8_dev(vb)
    got = op("paged_attention_varlen")(dev(q), dev(k), dev(v), kp, vp, dev(slots), dev(tables), dev(lens), dev(cu),
                                       dev(pos), kv_dtype="Q8_0")
    np.testing.assert_array_equal(host(vp).reshape(ref_v.shape), ref_v)
    np.testing.assert_allclose(host(got), ref, atol=3e-3, rtol=2e-3)   # flash: f16 q, f16 K/V, f32 sums


def test_kv_dtype_must_name_the_pages():
    from tffedu.errors import ShapeError
    rng = np.random.default_rng(0)
    kb = q8_pages(2, 4, 1, 32, rng)
    q = dev(rng.standard_normal((1, 2, 32)).astype(np.float32))
    tables, lens = dev(np.zeros((1, 1), np.int32)), dev(np.ones(1, np.int32))
    with pytest.raises(ShapeError, match="kv_dtype 'F16' names other pages than these"):
        op("paged_attention_decode")(q, q8_dev(kb), q8_dev(kb), tables, lens, kv_dtype="F16")
    with pytest.raises(ShapeError, match="v_pages"):
        op("paged_attention_decode")(q, q8_dev(kb), dev(f16_of(kb)), tables, lens)


# ---------------------------------------------------------------------------------------------
# whole models: tffedu.load(..., device="cuda", kv_dtype="Q8_0")

PROMPT = [11, 250, 3, 499, 17, 17, 64, 128, 5, 300, 42] * 4          # 44 tokens: pages 1..2 of 32
# The GPU's f32 keys differ from HF's in the last bits (~1e-6 here, ~1e-7 on the CPU), and each
# difference that straddles a rounding boundary puts a code one step (1/127 of its block's largest
# value) off, so the GPU lands further from the Q8_0-rounded oracle than the CPU does (test_kv8: 1e-3).
# Gemma's post-attention norm lifts that ~4x, as in test_gpu_model (0.025 measured on an H100).
CASES = {   # head_dim a multiple of 32; (maker, kwargs, weight type, tolerance on rel err)
    "qwen3-gqa4-hd32": (tiny_qwen3, dict(hidden=64, heads=8, kv_heads=2, head_dim=32), "F32", 3e-3),
    "qwen3-gqa2-hd128-Q8_0": (tiny_qwen3, dict(hidden=256, heads=4, kv_heads=2, head_dim=128), "Q8_0", 3e-2),
    "llama-gqa2-hd32-Q8_0": (tiny_llama, dict(hidden=128, heads=4, kv_heads=2, head_dim=32), "Q8_0", 3e-2),
    "mistral-window6-hd64": (tiny_mistral, dict(hidden=128, heads=2, kv_heads=1, head_dim=64, window=6), "F32", 3e-3),
    "gemma3-hd32": (tiny_gemma3, dict(), "F32", 4e-2),
}


@pytest.fixture(scope="module", params=list(CASES))
def case(request, tmp_path_factory):
    build, kw, wtype, tol = CASES[request.param]
    hf = build(seed=3, **kw)
    return hf, write_gguf(hf, tmp_path_factory.mktemp("kv8") / f"{request.param}.gguf", wtype), wtype, tol


def test_logits_are_hfs_over_q8_0_rounded_kv_on_cuda(case):
    import tffedu
    hf, path, _, tol = case
    m = tffedu.load(path, device="cuda", kv_dtype="Q8_0")
    assert m.kv_dtype == "Q8_0"
    with hf_q8_kv(hf):
        ref = hf_logits(hf, PROMPT)
    for n in (1, 7, len(PROMPT)):                     # decode-sized, a small prefill, a longer one
        got = m.logits(PROMPT[:n])
        err = rel_err(got, ref[:n])
        print(f"Q8_0 K/V on cuda T={n}: rel err vs HF over Q8_0-rounded K/V {err:.1e}")
        assert err < tol
    f16 = tffedu.load(path, device="cuda").logits(PROMPT)
    print(f"Q8_0 K/V vs F16 K/V on cuda: rel err {rel_err(got, f16):.1e}, "
          f"argmax agreement {(got.argmax(-1) == f16.argmax(-1)).mean():.1%}")


def test_generate_batch_equals_generate_over_q8_0_pages(case):
    "F32 weights (the same matmul kernel at any batch size): batched decode over 8-bit pages is decode alone."
    import tffedu
    from tffedu.engine import engine_of
    _, path, wtype, _ = case
    if wtype != "F32":
        pytest.skip("quantized weights: a batch may take another matmul kernel than one row")
    m = tffedu.load(path, device="cuda", kv_dtype="Q8_0")
    prompts = [PROMPT[:40], PROMPT[:40] + [7], PROMPT[:9], PROMPT[3:30]]      # two share a page of prefix
    alone = [m.generate(p, max_new_tokens=10, ignore_eos=True).tokens for p in prompts]
    for caching in (False, True):
        engine_of(m, max_batch=4, prefix_caching=caching)
        assert [g.tokens for g in m.generate_batch(prompts, max_new_tokens=10, ignore_eos=True)] == alone


def test_the_pages_on_the_gpu_take_34_bytes_for_32_values(case):
    import tffedu
    from tffedu.engine import engine_of
    path = case[1]
    m = tffedu.load(path, device="cuda", kv_dtype="Q8_0")
    m.generate(PROMPT[:5], max_new_tokens=2)
    runner = engine_of(m).runner
    pages = runner.pages["blk.0.k_pages"]
    P, ps, Hkv, D = pages.shape
    assert pages.dtype.name == "Q8_0" and pages.nbytes == P * ps * Hkv * D // 32 * 34
