"""A mixture of experts on the GPU (chapter 11d, issue 31) against numpy and HF transformers:

* the routing kernels (`moe_route`, `moe_sort`) against chapter 07's numpy routing: the same experts
  (ties to the lower one), weights, counts, and a grouping every tile of which is one expert's;
  NaN logits still pick k distinct experts in range;
* the `moe_ffn` op for every expert type the GEMVs read (and floats, and mixes) against chapter 07's
  numpy op on the same dequantized weights, at decode and prefill sizes;
* random Qwen3-MoE models on the GPU: logits against HF float32, greedy tokens HF's top-1,
  generate_batch == generate with the decode graphs replaying.
GPU machine only (skipped elsewhere)."""
import numpy as np
import pytest

from hf_models import hf_greedy_gaps, hf_logits, tiny_qwen3moe, write_gguf

pytestmark = pytest.mark.gpu


def dev(a, dtype=None):
    from tffedu.tensor import Tensor
    return (Tensor.from_numpy(a) if dtype is None else Tensor.from_numpy(a, dtype)).to("cuda")


# tiles of one pair (moe_pair_tiles: moe_route alone), of one row sorted, of several; near the edges
@pytest.mark.parametrize("T,E,k,norm", [(1, 8, 2, True), (3, 64, 8, False), (32, 128, 8, True), (1, 256, 8, False),
                                        (40, 4, 4, True), (33, 128, 8, True), (64, 128, 8, True), (513, 16, 4, True),
                                        (7, 300, 1, False), (1, 257, 8, True)])
def test_route_and_sort_match_numpy(T, E, k, norm):
    from tffedu.ops.cpu import moe_route as route_ref
    from tffedu.ops.cuda_moe import moe_pair_tiles, moe_route_sort
    rng = np.random.default_rng(T * 1000 + E + k)
    logits = (3 * rng.standard_normal((T, E))).astype(np.float32)
    logits[0, :3] = logits[0, 3]                         # a four-way tie: the lower experts first
    r = moe_route_sort(dev(logits), k, norm)
    top, w = route_ref(logits, k, norm)
    np.testing.assert_array_equal(r["ids"], top)
    np.testing.assert_allclose(r["wts"], w, rtol=2e-5, atol=1e-7)
    P, ids = T * k, r["ids"].ravel()
    if moe_pair_tiles(P, E):                           # decode: a tile is a pair, in pair order (no sort)
        np.testing.assert_array_equal(r["perm"], np.arange(P))
        np.testing.assert_array_equal(r["pos"], np.arange(P))
        np.testing.assert_array_equal(r["tiles"], np.stack([ids, np.arange(P), np.ones(P, int)], axis=1))
        return
    np.testing.assert_array_equal(r["counts"], np.bincount(ids, minlength=E))
    perm, pos = r["perm"], r["pos"]
    np.testing.assert_array_equal(np.sort(perm), np.arange(P))
    np.testing.assert_array_equal(pos[perm], np.arange(P))
    e_sorted = ids[perm]
    assert np.all(np.diff(e_sorted) >= 0)                          # grouped by expert ...
    assert np.all(np.diff(perm)[np.diff(e_sorted) == 0] > 0)       # ... in pair order within one
    tiles, BM = r["tiles"], r["BM"]
    used = tiles[tiles[:, 0] >= 0]
    assert np.all(tiles[len(used):, 0] == -1)                      # used slots first, the rest marked
    covered = np.zeros(P, int)
    for e, m0, n in used:
        assert 1 <= n <= BM and np.all(e_sorted[m0:m0 + n] == e)
        covered[m0:m0 + n] += 1
    assert np.all(covered == 1)


# rows of one warp's share, a partial last warp (D = 96, 2080), one block; k = 1 and many pairs
@pytest.mark.parametrize("T,D,k", [(1, 2048, 8), (3, 96, 8), (2, 2080, 1), (4, 32, 2)])
def test_route_quantizes_the_pairs_rows_at_decode(T, D, k):
    """On the pair road moe_route also writes pair q's int8 activations (token q // k's row, which
    moe_gather_q8 writes on the sorted road): bit for bit numpy's d = amax / 127 and codes x / d
    rounded half to even, in float32."""
    from tffedu.ops.cuda_moe import _route, moe_pair_tiles
    from tffedu.tensor import F32, I8, I32, Tensor
    E, P = 128, T * k
    assert moe_pair_tiles(P, E)
    rng = np.random.default_rng(D + k)
    x = (rng.standard_normal((T, D)) * rng.uniform(0.01, 100, (T, 1))).astype(np.float32)
    x[0, :32] = 0                                      # an all-zero block: d = 0, codes 0
    logits = rng.standard_normal((T, E)).astype(np.float32)
    bufs = dict(ids=(P,), wts=(P,), counts=(E,), perm=(P,), pos=(P,), tiles=(P, 3), xq=(P, D), xd=(P, D // 32))
    b = {n: Tensor.empty(s, I8 if n == "xq" else F32 if n in ("wts", "xd") else I32, "cuda") for n, s in bufs.items()}
    xs, lg = dev(x), dev(logits)
    assert _route(lg.data_ptr(), T, E, k, True, {n: t.data_ptr() for n, t in b.items()} | {"BM": 1, "n_tiles": P},
                  x=xs.data_ptr(), D=D)
    blocks = np.repeat(x, k, axis=0).reshape(P, D // 32, 32)
    d = np.abs(blocks).max(-1) / np.float32(127)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(d[..., None] > 0, np.rint(blocks / d[..., None]), 0).astype(np.int8)
    np.testing.assert_array_equal(b["xd"].to("cpu").numpy(), d)
    np.testing.assert_array_equal(b["xq"].to("cpu").numpy(), q.reshape(P, D))


@pytest.mark.parametrize("T,E", [(4, 64), (4, 16), (80, 16)])   # tiles of one pair; sorted, BM = 1; BM = 8
def test_route_survives_nan_logits(T, E):
    from tffedu.ops.cuda_moe import moe_route_sort
    logits = np.random.default_rng(0).standard_normal((T, E)).astype(np.float32)
    logits[0] = np.nan
    logits[1, 3] = np.nan
    logits[2, :] = -np.inf
    r = moe_route_sort(dev(logits), 4, True)
    assert np.all((r["ids"] >= 0) & (r["ids"] < E))
    assert all(len(set(row)) == 4 for row in r["ids"].tolist())
    assert np.all(np.isfinite(r["wts"][3:]))


def expert_tensor(w: np.ndarray, wk: str):
    """Stacked experts f32 [E, N, K] as the runner uploads them in type wk (a REPACKED type in the
    GPU's layout), and their values as the file holds them."""
    from tffedu.ops.cuda_quant import REPACKED, repack_blocks
    from tffedu.quant import dequantize, quantize
    E, N, K = w.shape
    if wk in ("F32", "F16"):
        a = w.astype(np.float32 if wk == "F32" else np.float16)
        return dev(a), a.astype(np.float32)
    if wk == "BF16":                                   # the top 16 bits (truncated, as the reference)
        bits = (w.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
        return dev(bits, "BF16"), (bits.astype(np.uint32) << 16).view(np.float32)
    raw = quantize(w.reshape(E * N, K), wk)
    ref = dequantize(raw, wk, (E * N, K)).reshape(E, N, K).astype(np.float32)
    if wk in REPACKED:
        raw, wk = repack_blocks(raw, wk), REPACKED[wk]
    return dev(raw.reshape(E, N, -1), wk), ref


TYPES = ["F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K"]
MIXES = [("Q4_K", "Q4_K", "Q6_K"), ("Q8_0", "Q4_K", "Q8_0"), ("F16", "Q8_0", "F32")]


@pytest.mark.parametrize("T", [1, 8, 40, 130])
@pytest.mark.parametrize("types", [(t, t, t) for t in TYPES] + MIXES, ids=lambda t: "-".join(t) if isinstance(t, tuple) else t)
def test_moe_ffn_matches_numpy(types, T):
    from tffedu.ops.cpu import moe_ffn as moe_ref
    from tffedu.ops.cuda_moe import moe_ffn
    D, F, E, k = 256, 512, 16, 4
    rng = np.random.default_rng(T)
    x = rng.standard_normal((T, D)).astype(np.float32)
    router = (0.2 * rng.standard_normal((E, D))).astype(np.float32)
    (g, gr), (u, ur), (d, dr) = (expert_tensor((0.05 * rng.standard_normal(s)).astype(np.float32), t)
                                 for s, t in zip(((E, F, D), (E, F, D), (E, D, F)), types))
    for norm in (True, False):
        ref = moe_ref(x, router, gr, ur, dr, k=k, norm=norm)
        got = moe_ffn(dev(x), dev(router), g, u, d, k=k, norm=norm).to("cpu").numpy()
        err = np.abs(got - ref).max() / np.abs(ref).max()
        floats = all(t in ("F32", "F16", "BF16") for t in types)
        assert err < (1e-5 if floats else 2e-2), err      # int8 activations: the GEMVs' own error


def test_moe_ffn_refuses_bad_arguments():
    from tffedu.errors import ShapeError
    from tffedu.ops.cuda_moe import moe_ffn
    x, r = dev(np.zeros((2, 64), np.float32)), dev(np.zeros((4, 64), np.float32))
    g, d = dev(np.zeros((4, 32, 64), np.float32)), dev(np.zeros((4, 64, 32), np.float32))
    for k in (0, 5, 1.5):
        with pytest.raises(ShapeError, match="k"):
            moe_ffn(x, r, g, g, d, k=k)
    with pytest.raises(ShapeError, match="must be"):
        moe_ffn(x, r, g, g, g, k=2)
    with pytest.raises(ShapeError, match="must be"):
        moe_ffn(x, dev(np.zeros((3, 64), np.float32)), g, g, d, k=2)


MODELS = [   # (name, tiny_qwen3moe arguments, weight type, tolerance on max|err| / max|logit|)
    ("e8-k2 F32", dict(experts=8, top_k=2, seed=1), "F32", 3e-3),
    ("e16-k4 raw tied F16", dict(experts=16, top_k=4, norm_topk_prob=False, tied=True, seed=2), "F16", 5e-3),
    ("e64-k8 Q8_0", dict(experts=64, top_k=8, hidden=256, heads=4, head_dim=64, expert_ffn=256, seed=3), "Q8_0", 3e-2),
    ("e16-k4 Q4_K_M", dict(experts=16, top_k=4, hidden=256, heads=4, head_dim=64, expert_ffn=256, seed=4), "Q4_K_M", 3e-2),
]


NEAR_TIE = 5e-3    # a router gap below this share of its logits' range: rounding picks the expert


def router_gaps(hf, ids, k: int) -> np.ndarray:
    """Per token, the smallest gap over the layers between HF's k-th and (k+1)-th router logit, over
    that token's range of router logits. Where it is tiny, the GPU's rounding (int8 or fp16
    activations) may pick the other expert, and that token's logits rightly differ from HF's."""
    import torch
    E, rows = hf.config.num_experts, []

    def keep(mod, inp, out):
        outs = out if isinstance(out, (tuple, list)) else (out,)
        rows.append(next(o for o in outs if torch.is_tensor(o) and o.shape[-1] == E).detach().reshape(-1, E).numpy())
    hooks = [layer.mlp.gate.register_forward_hook(keep) for layer in hf.model.layers]
    try:
        hf_logits(hf, ids)
    finally:
        for h in hooks:
            h.remove()
    gaps = []
    for r in rows:
        s = -np.sort(-r.astype(np.float64), -1)
        gaps.append((s[:, k - 1] - s[:, k]) / (s[:, 0] - s[:, -1]))
    return np.min(gaps, 0)


@pytest.mark.parametrize("name,kw,wtype,tol", MODELS, ids=[m[0] for m in MODELS])
def test_qwen3moe_on_cuda_matches_hf(tmp_path, name, kw, wtype, tol, capfd):
    import tffedu
    from tffedu.engine import engine_of
    hf = tiny_qwen3moe(**kw)
    m = tffedu.load(write_gguf(hf, tmp_path / "m.gguf", wtype), device="cuda", n_ctx=256)
    ids = np.random.default_rng(0).integers(0, 400, 60).tolist()
    steady = router_gaps(hf, ids, kw["top_k"]) >= NEAR_TIE    # tokens whose every layer routes clearly
    assert steady.sum() >= 30                                  # (HF's alone: the same tokens at every run)
    for n in (1, 7, 60):
        got, ref = m.logits(ids[:n]), hf_logits(hf, ids[:n])
        errs = np.abs(got - ref).max(-1) / np.abs(ref).max()   # per token
        err = errs[steady[:n]].max(initial=0.0)
        ours = got.argmax(-1)
        print(f"{name:22s} T={n:3d} rel err {err:.1e} ({(~steady[:n]).sum()} router near-ties left out: "
              f"{errs.max():.1e} with them) argmax agreement {(ours == ref.argmax(-1)).mean():.1%}")
        assert err < tol
        gap = (ref.max(-1) - ref[np.arange(n), ours])[steady[:n]]   # a differing argmax: a near-tie in HF
        assert np.all(gap <= 2 * err * np.abs(ref).max()), gap.max()
    prompt = ids[:9]
    ours = m.generate(prompt, max_new_tokens=12, ignore_eos=True).tokens
    gap = hf_greedy_gaps(hf, prompt, ours)
    assert np.all(gap <= 2 * tol), gap
    rng = np.random.default_rng(1)
    ps = [rng.integers(0, 400, rng.integers(3, 30)).tolist() for _ in range(5)]
    alone = [m.generate(p, max_new_tokens=10, ignore_eos=True).tokens for p in ps]
    engine_of(m, max_batch=4)
    batch = [o.tokens for o in m.generate_batch(ps, max_new_tokens=10, ignore_eos=True)]
    for p, b, a in zip(ps, batch, alone):
        # A batch computes a token with other kernels or tilings than alone (many prefill rows take
        # the tensor cores' fp16 activations, a few the GEMVs' int8 ones; attention splits by the
        # batch): the rounding differs, and a router's near-tie then picks another expert. Where the
        # two greedy runs part, the batch's tokens must still be HF's top-1 up to a near-tie.
        if b != a:
            gap = hf_greedy_gaps(hf, p, b)
            assert np.all(gap <= 2 * tol), (b, a, gap)
    print(f"{name}: generate_batch = generate for {sum(b == a for b, a in zip(batch, alone))} of {len(ps)} prompts")
    assert engine_of(m).runner.stats["replayed"] > 0              # decode ran from CUDA graphs
    assert "dequantized to F16" not in capfd.readouterr().err
