"""One contract per op name on every backend (issue 9): a table of the inputs and attributes the
model creators and the runner really pass (partial rotary, linear RoPE scale, GQA ratios, head
dims 64 and 128 and small ones, every weight type, paged varlen batches), fed to every registered
(op, backend) pair.

On the CPU each op is checked against an independent reference (float64 numpy, or torch); on the
GPU each op is checked against the CPU op (the contract) — or, for the GPU-only fused/helper ops,
against the composition of CPU ops it stands for. A registered op without a case fails the test,
so a new op cannot arrive without its contract.
"""
import math

import gguf
import numpy as np
import pytest
import torch

from tffedu.factory import OPS
from tffedu.parallel import SimGroup       # registers all_reduce on the CPU (chapter 17)
from tffedu.tensor import DTYPES, Tensor

RNG = np.random.default_rng(0)


def q8_0(w: np.ndarray) -> np.ndarray:
    "Raw Q8_0 blocks of w (gguf-py, the real format)."
    return gguf.quants.quantize(np.ascontiguousarray(w, np.float32), gguf.GGMLQuantizationType.Q8_0)


def weight(w: np.ndarray, kind: str):
    "A weight as the model file gives it: a tffedu Tensor of `kind` (quantized: raw blocks)."
    if kind == "F32":
        return Tensor.from_numpy(np.ascontiguousarray(w, np.float32))
    if kind == "F16":
        return Tensor.from_numpy(w.astype(np.float16))
    if kind == "BF16":
        return Tensor.from_numpy((w.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16), DTYPES["BF16"])
    qt = getattr(gguf.GGMLQuantizationType, kind)
    return Tensor.from_numpy(gguf.quants.quantize(np.ascontiguousarray(w, np.float32), qt), DTYPES[kind])


def dequant(t) -> np.ndarray:
    "float64 values of a weight Tensor, by gguf-py (not our code)."
    name = t.dtype.name
    raw = t.numpy()
    if name in ("F32", "F16"):
        return raw.astype(np.float64)
    if name == "BF16":
        return (raw.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return gguf.quants.dequantize(raw, getattr(gguf.GGMLQuantizationType, name)).astype(np.float64)


def rmsnorm_ref(x, w, eps):
    x = x.astype(np.float64)
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * dequant(w)


def rope_ref(x, pos, theta=10000.0, mode="neox", n_dims=None, freq_scale=1.0, freq_factors=()):
    "ggml's rope_ext: pair j turns at pos * freq_scale * theta^(-2j/n) / freq_factors[j]."
    x = x.astype(np.float64)
    n = x.shape[-1] if n_dims is None else n_dims
    j = np.arange(n // 2)
    ang = np.asarray(pos, np.float64)[:, None] * freq_scale * theta ** (-2.0 * j / n)
    if len(freq_factors):
        ang = ang / np.asarray(freq_factors, np.float64)
    c, s = np.cos(ang)[:, None], np.sin(ang)[:, None]
    ia = j if mode == "neox" else 2 * j
    ib = ia + (n // 2 if mode == "neox" else 1)
    y = x.copy()
    y[..., ia] = x[..., ia] * c - x[..., ib] * s
    y[..., ib] = x[..., ia] * s + x[..., ib] * c
    return y


def sdpa(q, k, v, pos, scale=None, window=0):
    """torch float64: q [T, Hq, D] at positions pos over k, v [S, Hkv, D]; key j visible if j <= pos
    (and j > pos - window, if window)."""
    g = q.shape[1] // k.shape[1]
    qt = torch.from_numpy(q.astype(np.float64)).transpose(0, 1)
    kt = torch.from_numpy(k.astype(np.float64)).repeat_interleave(g, 1).transpose(0, 1)
    vt = torch.from_numpy(v.astype(np.float64)).repeat_interleave(g, 1).transpose(0, 1)
    j, p = torch.arange(len(k))[None, :], torch.as_tensor(np.asarray(pos))[:, None]
    mask = (j <= p) & (j > p - window) if window else j <= p
    o = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, attn_mask=mask, scale=scale)
    return o.transpose(0, 1).numpy()


def f32(*shape, scale=1.0):
    return (scale * RNG.standard_normal(shape)).astype(np.float32)


def norm_w(n):
    return Tensor.from_numpy((1 + 0.1 * RNG.standard_normal(n)).astype(np.float32))


def pack_q8(x: np.ndarray) -> np.ndarray:
    "Packed int8 activations (rmsnorm_q8's output): int8 quants [T, K], then f32 scales [T, K/32]."
    T, K = x.shape
    blk = x.astype(np.float32).reshape(T, K // 32, 32)
    d = (np.abs(blk).max(-1) / np.float32(127)).astype(np.float32)
    q = np.where(d[..., None] > 0, np.rint(blk / np.where(d > 0, d, 1)[..., None]), 0).astype(np.int8)
    return np.concatenate([q.reshape(-1), d.reshape(-1).view(np.int8)]).reshape(T, K + K // 8)


def unpack_q8(p: np.ndarray) -> np.ndarray:
    "float64 values of packed int8 activations [T, K + K/8]."
    T, K = p.shape[0], p.shape[1] * 8 // 9
    flat = np.ascontiguousarray(p).reshape(-1)
    q = flat[:T * K].astype(np.float64).reshape(T, K // 32, 32)
    d = flat[T * K:].view(np.float32).astype(np.float64).reshape(T, K // 32, 1)
    return (q * d).reshape(T, K)


# ---- a paged batch as the engine builds it ---------------------------------------------------------
def paged_batch(chunks, starts, Hq, Hkv, D, page_size, decode=False, pad_rows=0, pad_seqs=0):
    """Sequences with `starts[b]` cached tokens and `chunks[b]` new ones, pages scattered over a
    pool; the batch arrays padded like the engine's buckets. Returns (args, refs) where refs hold
    each sequence's full K/V for the reference."""
    B = len(chunks)
    lens = [s + n for s, n in zip(starts, chunks)]
    need = [-(-L // page_size) for L in lens]
    P = sum(need) + 3
    perm = RNG.permutation(P)
    tables, used = [], 0
    for n in need:
        tables.append(perm[used:used + n])
        used += n
    max_pages = max(need)
    k_pages = (0.5 * RNG.standard_normal((P, page_size, Hkv, D))).astype(np.float16)
    v_pages = (0.5 * RNG.standard_normal((P, page_size, Hkv, D))).astype(np.float16)
    N = sum(chunks)
    q, k, v = f32(N + pad_rows, Hq, D), f32(N + pad_rows, Hkv, D, scale=0.5), f32(N + pad_rows, Hkv, D, scale=0.5)
    Bb = B + pad_seqs
    slots = np.full(N + pad_rows, -1, np.int32)
    pos = np.zeros(N + pad_rows, np.int32)
    pt = np.full((Bb, max_pages), -1, np.int32)
    seq_lens = np.zeros(Bb, np.int32)
    cu = np.zeros(Bb + 1, np.int32)
    row = 0
    for b, (s, n) in enumerate(zip(starts, chunks)):
        pt[b, :need[b]] = tables[b]
        t = np.arange(s, s + n)
        slots[row:row + n] = tables[b][t // page_size] * page_size + t % page_size
        pos[row:row + n] = t
        seq_lens[b] = s + n
        row += n
        cu[b + 1:] = row
    attrs = dict(decode=True) if decode else {}
    return [q, k, v, k_pages, v_pages, slots, pt, seq_lens, cu, pos], attrs


def drop_left_pages(tables, first_pos, window: int, page_size: int) -> None:
    "Mark -1 the pages of sequence b wholly before the oldest key its row at first_pos[b] sees (in place)."
    for b, p in enumerate(first_pos):
        tables[b, :max(int(p) - window + 1, 0) // page_size] = -1


def varlen_ref(args, attrs):
    "Store, then attend: float64 through the page tables, by torch SDPA; also the pages after."
    q, k, v, kp, vp, slots, pt, lens, cu, pos = args
    kp, vp = kp.copy(), vp.copy()
    live = slots >= 0
    kp.reshape(-1, *kp.shape[2:])[slots[live]] = k[live]
    vp.reshape(-1, *vp.shape[2:])[slots[live]] = v[live]
    out = np.zeros(q.shape)
    ps = kp.shape[1]
    for b in range(len(lens)):
        lo, hi, S = cu[b], cu[b + 1], lens[b]
        if hi > lo:
            t = np.arange(S)
            kk, vv = kp[pt[b][t // ps], t % ps], vp[pt[b][t // ps], t % ps]
            out[lo:hi] = sdpa(q[lo:hi], kk, vv, pos[lo:hi], window=attrs.get("window", 0))
    return out, kp, vp


# ---- the table -------------------------------------------------------------------------------------
# (op, case id, make() -> (args, attrs), reference(args, attrs) -> expected, tolerances)
# Tolerances: (CPU vs reference, GPU vs the CPU op), relative to max |expected|.
CASES = []


def case(op, name, tol_cpu=1e-5, tol_gpu=1e-5, gpu_only=False, cpu_only=False):
    "gpu_only: a GPU op whose reference is the CPU ops it fuses; cpu_only: input types only the CPU reads."
    def add(fn):
        make, ref = fn()
        CASES.append(dict(op=op, name=name, make=make, ref=ref, tol_cpu=tol_cpu, tol_gpu=tol_gpu,
                          gpu_only=gpu_only, cpu_only=cpu_only))
        return fn
    return add


for kind in ("F32", "F16", "BF16", "Q8_0"):
    @case("get_rows", f"embedding {kind}", tol_gpu=1e-6)
    def _(kind=kind):
        tab = weight(f32(300, 64), kind)
        ids = RNG.integers(0, 300, 17).astype(np.int32)
        return (lambda: ([tab, ids], {})), (lambda a, kw: dequant(a[0])[a[1]])


@case("get_rows", "last rows of a flat batch (activations)")
def _():
    x, last = f32(12, 48), np.array([3, 7, 11, 0], np.int32)
    return (lambda: ([x, last], {})), (lambda a, kw: a[0][a[1]].astype(np.float64))


for shape in ((5, 64), (3, 4, 128), (7, 2, 16), (2, 1536)):
    @case("rmsnorm", f"x{list(shape)}", tol_gpu=2e-6)
    def _(shape=shape):
        x, w = f32(*shape), norm_w(shape[-1])
        return (lambda: ([x, w], dict(eps=1e-6))), (lambda a, kw: rmsnorm_ref(a[0], a[1], kw["eps"]))

for T, K, N in ((1, 64, 96), (3, 128, 200), (8, 96, 64), (9, 64, 130), (40, 256, 96)):
    for kind in ("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1"):
        # the GPU reads Q8_0 as int8 activations (chapter 11): ~1e-2 at these small K; the GPU
        # runner converts Q4_0/Q4_1 weights to F16 at load, its matmul never sees them
        tg = {"Q8_0": 3e-2, "F16": 2e-3, "BF16": 1e-2}.get(kind, 1e-5)

        @case("matmul", f"T{T} {K}->{N} {kind}", tol_cpu=1e-5, tol_gpu=tg, cpu_only=kind.startswith("Q4"))
        def _(T=T, K=K, N=N, kind=kind):
            x, w = f32(T, K), weight(f32(N, K, scale=0.1), kind)
            return (lambda: ([x, w], {})), (lambda a, kw: a[0].astype(np.float64) @ dequant(a[1]).T)

# the GPU-only fused matmuls of chapter 12b's lowering: the ops they replace, composed in float64
for T, K, N in ((1, 64, 96), (3, 128, 200), (8, 96, 64), (9, 64, 130)):
    for kind in ("F32", "F16", "Q8_0"):
        tg = {"Q8_0": 3e-2, "F16": 2e-3}.get(kind, 1e-5)

        @case("matmul_add", f"T{T} {K}->{N} {kind}", tol_gpu=tg, gpu_only=True)
        def _(T=T, K=K, N=N, kind=kind):
            x, w, r = f32(T, K), weight(f32(N, K, scale=0.1), kind), f32(T, N)
            return (lambda: ([x, w, r], {})), (lambda a, kw: a[2] + a[0].astype(np.float64) @ dequant(a[1]).T)

        if kind == "Q8_0" and T <= 8:
            @case("matmul_add", f"T{T} {K}->{N} packed int8 x", tol_gpu=1e-5, gpu_only=True)
            def _(T=T, K=K, N=N):
                xq, w, r = pack_q8(f32(T, K)), weight(f32(N, K, scale=0.1), "Q8_0"), f32(T, N)
                return (lambda: ([xq, w, r], {})), (lambda a, kw: a[2] + unpack_q8(a[0]) @ dequant(a[1]).T)

        @case("matmul_swiglu", f"T{T} {K}->{N} {kind}", tol_gpu=2 * tg, gpu_only=True)
        def _(T=T, K=K, N=N, kind=kind):
            x, wg, wu = f32(T, K), weight(f32(N, K, scale=0.1), kind), weight(f32(N, K, scale=0.1), kind)

            def ref(a, kw):
                g, u = a[0].astype(np.float64) @ dequant(a[1]).T, a[0].astype(np.float64) @ dequant(a[2]).T
                return g / (1 + np.exp(-g)) * u
            return (lambda: ([x, wg, wu], {})), ref

# q, k and v of one input in one launch: the planar concatenation of the matmuls
for T, K, Ns in ((1, 64, (96, 32, 32)), (3, 256, (200, 40)), (6, 512, (130, 66, 66)), (33, 256, (128, 64, 64)),
                 (9, 96, (64, 32, 32))):
    @case("matmul_cat", f"T{T} {K}->{Ns} Q8_0", tol_gpu=3e-2, gpu_only=True)
    def _(T=T, K=K, Ns=Ns):
        x, ws = f32(T, K), [weight(f32(n, K, scale=0.1), "Q8_0") for n in Ns]
        return (lambda: ([x, *ws], {})), (lambda a, kw: np.concatenate(
            [(a[0].astype(np.float64) @ dequant(w).T).ravel() for w in a[1:]]))

    if T <= 8:
        @case("matmul_cat", f"T{T} {K}->{Ns} packed int8 x", tol_gpu=1e-5, gpu_only=True)
        def _(T=T, K=K, Ns=Ns):
            xq, ws = pack_q8(f32(T, K)), [weight(f32(n, K, scale=0.1), "Q8_0") for n in Ns]
            return (lambda: ([xq, *ws], {})), (lambda a, kw: np.concatenate(
                [(unpack_q8(a[0]) @ dequant(w).T).ravel() for w in a[1:]]))

for T, D in ((1, 64), (3, 1024), (5, 1536), (8, 4096)):
    # quantization to int8 costs up to half a step of each 32-block's scale (amax / 254)
    @case("rmsnorm_q8", f"x[{T}, {D}]", tol_gpu=5e-3, gpu_only=True)
    def _(T=T, D=D):
        x, w = f32(T, D), norm_w(D)
        return (lambda: ([x, w], dict(eps=1e-6))), (lambda a, kw: rmsnorm_ref(a[0], a[1], kw["eps"]))

for T, K, N in ((1, 64, 96), (4, 1024, 200), (8, 96, 64)):
    @case("matmul_q8", f"T{T} {K}->{N} Q8_0", tol_gpu=1e-5, gpu_only=True)
    def _(T=T, K=K, N=N):
        xq, w = pack_q8(f32(T, K)), weight(f32(N, K, scale=0.1), "Q8_0")
        return (lambda: ([xq, w], {})), (lambda a, kw: unpack_q8(a[0]) @ dequant(a[1]).T)

# Llama 3.1's per-pair factors: 1 for the fast pairs, 8 for the slow ones, a blend between
FF = {n: tuple(np.clip(np.geomspace(0.5, 16, n), 1, 8)) for n in (16, 32)}
ROPE = [dict(theta=1e6, mode="neox"), dict(theta=1e4, mode="norm"), dict(theta=1e4, mode="neox", n_dims=32),
        dict(theta=5e5, mode="norm", n_dims=48, freq_scale=0.25), dict(theta=1e6, mode="neox", freq_scale=0.5),
        dict(theta=5e5, mode="neox", n_dims=64, freq_factors=FF[32]),
        dict(theta=1e4, mode="norm", n_dims=32, freq_scale=0.5, freq_factors=FF[16])]
for attrs in ROPE:
    for H, hd in ((4, 64), (2, 128)):
        if attrs.get("n_dims", 0) > hd:
            continue
        label = {k: (f"{len(v)} factors" if k == "freq_factors" else v) for k, v in attrs.items()}

        @case("rope", f"{label} H{H} hd{hd}", tol_cpu=1e-5, tol_gpu=1e-5)
        def _(attrs=attrs, H=H, hd=hd):
            x, pos = f32(6, H, hd), np.array([0, 1, 7, 100, 4000, 31999], np.int32)
            return (lambda: ([x, pos], dict(attrs))), (lambda a, kw: rope_ref(a[0], a[1], **kw))

        @case("qk_norm_rope", f"{label} H{H} hd{hd}", tol_gpu=1e-5, gpu_only=True)
        def _(attrs=attrs, H=H, hd=hd):
            x, w, pos = f32(6, H, hd), norm_w(hd), np.array([0, 3, 9, 77, 5000, 20000], np.int32)
            return (lambda: ([x, w, pos], dict(eps=1e-6, **attrs))), \
                   (lambda a, kw: rope_ref(rmsnorm_ref(a[0], a[1], kw["eps"]), a[2],
                                           **{k: v for k, v in kw.items() if k != "eps"}))

        @case("qk_norm_rope_pair", f"{label} H{H}+{H // 2 or 1} hd{hd}", tol_gpu=1e-5, gpu_only=True)
        def _(attrs=attrs, H=H, hd=hd):
            q, k, wq, wk = f32(6, H, hd), f32(6, H // 2 or 1, hd), norm_w(hd), norm_w(hd)
            pos = np.array([0, 3, 9, 77, 5000, 20000], np.int32)

            def ref(a, kw):
                rot = {k_: v for k_, v in kw.items() if k_ != "eps"}
                return np.concatenate([rope_ref(rmsnorm_ref(x, w, kw["eps"]), a[4], **rot).ravel()
                                       for x, w in ((a[0], a[2]), (a[1], a[3]))])
            return (lambda: ([q, k, wq, wk, pos], dict(eps=1e-6, **attrs))), ref

        @case("qk_norm_rope_store", f"{label} H{H}+{H // 2 or 1} hd{hd}", tol_gpu=1e-3, gpu_only=True)
        def _(attrs=attrs, H=H, hd=hd):
            Hk = H // 2 or 1
            q, k, v, wq, wk = f32(6, H, hd), f32(6, Hk, hd), f32(6, Hk, hd), norm_w(hd), norm_w(hd)
            pos = np.array([0, 3, 9, 77, 5000, 20000], np.int32)
            pages = [np.zeros((3, 4, Hk, hd), np.float16) for _ in range(2)]
            slots = np.array([5, 0, -1, 11, 2, 7], np.int32)          # a padding row (-1)

            def ref(a, kw):    # the pair's output, then the pages with the rotated k and v stored
                rot = {k_: v_ for k_, v_ in kw.items() if k_ != "eps"}
                qr, kr = (rope_ref(rmsnorm_ref(x, w, kw["eps"]), a[5], **rot) for x, w in ((a[0], a[3]), (a[1], a[4])))
                kp, vp = (np.asarray(p_, np.float64).reshape(-1, *p_.shape[2:]).copy() for p_ in (a[6], a[7]))
                stored = a[8] >= 0
                kp[a[8][stored]], vp[a[8][stored]] = kr[stored], a[2][stored]
                return np.concatenate([qr.ravel(), kr.ravel(), kp.ravel(), vp.ravel()])
            return (lambda: ([q, k, v, wq, wk, pos, *(p_.copy() for p_ in pages), slots], dict(eps=1e-6, **attrs))), ref

for op in ("add", "swiglu"):
    for shape in ((3, 96), (5, 7)):
        @case(op, f"{list(shape)}", tol_gpu=1e-6)
        def _(op=op, shape=shape):
            a, b = f32(*shape), f32(*shape)
            ref = (lambda x, y: x + y) if op == "add" else (lambda x, y: x / (1 + np.exp(-x)) * y)
            return (lambda: ([a, b], {})), (lambda args, kw: ref(args[0].astype(np.float64), args[1]))

for shape in ((3, 96), (5, 7), (2, 3, 33)):      # add's other form: a bias [N] over the rows of [..., N]
    @case("add", f"{list(shape)} + bias [{shape[-1]}]", tol_gpu=1e-6)
    def _(shape=shape):
        a, b = f32(*shape), f32(shape[-1])
        return (lambda: ([a, b], {})), (lambda args, kw: args[0].astype(np.float64) + args[1])


@case("add", "[4, 48] + bias [48] as a BF16 weight", cpu_only=True)   # the GPU's 1-D weights are f32
def _():
    a, b = f32(4, 48), weight(f32(48), "BF16")
    return (lambda: ([a, b], {})), (lambda args, kw: args[0].astype(np.float64) + dequant(args[1]))

# Gemma 3's (chapter 08c): GeGLU and the embedding's scale
@case("geglu", "[5, 96]")
def _():
    g, u = f32(5, 96, scale=3), f32(5, 96)
    return (lambda: ([g, u], {})), (lambda a, kw: torch.nn.functional.gelu(
        torch.from_numpy(a[0]).double(), approximate="tanh").numpy() * a[1])


@case("geglu", "[3, 37] (no float4 path)")
def _():
    g, u = f32(3, 37, scale=3), f32(3, 37)
    return (lambda: ([g, u], {})), (lambda a, kw: torch.nn.functional.gelu(
        torch.from_numpy(a[0]).double(), approximate="tanh").numpy() * a[1])


@case("scale", "[4, 64] by sqrt(1152)")
def _():
    x = f32(4, 64)
    return (lambda: ([x], dict(factor=math.sqrt(1152)))), (lambda a, kw: a[0].astype(np.float64) * kw["factor"])


# Qwen3-MoE's experts (chapters 08d and 11d); the reference runs token by token in float64
def moe_ref(a, kw):
    x, r, g, u, dn = (v.astype(np.float64) for v in a[:5])
    out = np.zeros((len(x), x.shape[1]))
    for t in range(len(x)):
        p = np.exp(r @ x[t] - (r @ x[t]).max()); p /= p.sum()
        top = np.argsort(-p, kind="stable")[:kw["k"]]
        w = p[top] / p[top].sum() if kw["norm"] else p[top]
        for e, we in zip(top, w):
            h = g[e] @ x[t]
            out[t] += we * (dn[e] @ (h / (1 + np.exp(-h)) * (u[e] @ x[t])))
    return out


for T, E, k, norm in ((1, 8, 2, True), (9, 16, 4, False), (40, 64, 8, True)):
    def moe_inputs(T=T, E=E, D=64, F=32):
        return [f32(T, D), f32(E, D, scale=0.3), f32(E, F, D, scale=0.1), f32(E, F, D, scale=0.1), f32(E, D, F, scale=0.1)]

    @case("moe_ffn", f"T{T} E{E} k{k} norm {norm}")
    def _(k=k, norm=norm, inputs=moe_inputs()):
        return (lambda: (inputs, dict(k=k, norm=norm))), moe_ref

    # chapter 12b's fusion of the residual add after it (GPU only): the add, composed
    @case("moe_ffn_add", f"T{T} E{E} k{k} norm {norm}", gpu_only=True)
    def _(T=T, k=k, norm=norm, inputs=moe_inputs()):
        res = f32(T, 64)
        return (lambda: (inputs + [res], dict(k=k, norm=norm))), (lambda a, kw: a[5] + moe_ref(a, kw))


for op, shape in (("silu", (4, 33)), ("mul", (4, 33))):
    @case(op, f"{list(shape)}")
    def _(op=op, shape=shape):
        a, b = f32(*shape), f32(*shape)
        if op == "silu":
            return (lambda: ([a], {})), (lambda x, kw: x[0].astype(np.float64) / (1 + np.exp(-x[0].astype(np.float64))))
        return (lambda: ([a, b], {})), (lambda x, kw: x[0].astype(np.float64) * x[1])


@case("softmax", "[3, 151936] logits", tol_gpu=1e-5)
def _():
    x = f32(3, 151936, scale=3)
    def ref(a, kw):
        e = np.exp(a[0].astype(np.float64) - a[0].max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)
    return (lambda: ([x], {})), ref


# chapter 17's all-reduce: on the CPU one group of simulated ranks; a single rank's sum is its own x
# (the sums over 2 and 4 ranks are tests/test_parallel.py's, through whole models)
ONE_RANK = SimGroup(1)                     # kept alive: the op finds its group by name


@case("all_reduce", "a group of one rank", tol_cpu=0)
def _():
    x = f32(3, 64)
    return (lambda: ([x], dict(group=ONE_RANK.name, rank=0))), (lambda a, kw: a[0].astype(np.float64))


@case("argmax", "[4, 50000]", tol_cpu=0, tol_gpu=0)
def _():
    x = f32(4, 50000)
    return (lambda: ([x], {})), (lambda a, kw: np.argmax(a[0], -1))


@case("argmax", "[3, 151936] ties across chunks, a flat row", tol_cpu=0, tol_gpu=0)
def _():
    x = f32(3, 151936)
    x[0, [5000, 2047, 150000]] = 9.0          # the first of equal maxima wins, chunks or not
    x[1, [151935, 4096]] = 9.0
    x[2] = -1.5                                # every value equal: index 0
    return (lambda: ([x], {})), (lambda a, kw: np.argmax(a[0], -1))


@case("argmax", "[2, 3000] one block per row", tol_cpu=0, tol_gpu=0)
def _():
    x = f32(2, 3000)
    x[1, [7, 2999]] = 5.0
    return (lambda: ([x], {})), (lambda a, kw: np.argmax(a[0], -1))


@case("cast", "F32 -> F16", tol_gpu=0, gpu_only=True)
def _():
    x = f32(5, 37)
    return (lambda: ([x], dict(dtype="F16"))), (lambda a, kw: a[0].astype(np.float16).astype(np.float64))


for Hq, Hkv, D in ((4, 4, 64), (8, 2, 128), (8, 1, 16)):
    @case("attention", f"prefill Hq{Hq} Hkv{Hkv} D{D}", tol_cpu=1e-5, tol_gpu=3e-3)
    def _(Hq=Hq, Hkv=Hkv, D=D):
        q, k, v = f32(9, Hq, D), f32(9, Hkv, D), f32(9, Hkv, D)
        return (lambda: ([q, k, v], dict(causal=True))), (lambda a, kw: sdpa(a[0], a[1], a[2], np.arange(9)))

    @case("attention", f"prefill, window 4, Hq{Hq} Hkv{Hkv} D{D}", tol_cpu=1e-5, tol_gpu=3e-3)
    def _(Hq=Hq, Hkv=Hkv, D=D):
        q, k, v = f32(9, Hq, D), f32(9, Hkv, D), f32(9, Hkv, D)
        return (lambda: ([q, k, v], dict(causal=True, window=4))), \
               (lambda a, kw: sdpa(a[0], a[1], a[2], np.arange(9), window=4))

    for W in (0, 5):
        @case("attention", f"dense cache{f', window {W}' if W else ''} Hq{Hq} Hkv{Hkv} D{D}", tol_cpu=1e-5,
              tol_gpu=3e-3)
        def _(Hq=Hq, Hkv=Hkv, D=D, W=W):
            ctx, start, T = 40, 11, 3
            cache = f32(2, ctx, Hkv, D, scale=0.5)
            q, k, v = f32(T, Hq, D), f32(T, Hkv, D), f32(T, Hkv, D)
            pos = np.arange(start, start + T).astype(np.int32)

            def ref(a, kw):
                c = a[3].copy()
                c[0, a[4]], c[1, a[4]] = a[1], a[2]
                return sdpa(a[0], c[0, :start + T], c[1, :start + T], a[4], window=W)
            return (lambda: ([q, k, v, cache.copy(), pos], dict(window=W) if W else {})), ref


for ps, Hq, Hkv, D, L in ((16, 8, 2, 128, 37), (1, 4, 4, 64, 5), (32, 16, 2, 64, 70)):
    for W in (0, 7):
        @case("paged_attention", f"ps{ps} Hq{Hq} Hkv{Hkv} D{D} L{L}" + (f", window {W}" if W else ""),
              tol_cpu=1e-5, tol_gpu=3e-3)
        def _(ps=ps, Hq=Hq, Hkv=Hkv, D=D, L=L, W=W):
            args, _ = paged_batch([3], [L - 3], Hq, Hkv, D, ps)
            q, _, _, kp, vp, _, pt, lens, _, _ = args
            sel = [q[:3], kp, vp, pt[0][pt[0] >= 0], int(lens[0])]

            def ref(a, kw):
                t = np.arange(a[4])
                return sdpa(a[0], a[1][a[3][t // ps], t % ps], a[2][a[3][t // ps], t % ps], t[-len(a[0]):],
                            window=W)
            return (lambda: (sel, dict(window=W) if W else {})), ref

    @case("paged_attention_decode", f"ps{ps} Hq{Hq} Hkv{Hkv} D{D}", tol_cpu=1e-5, tol_gpu=3e-3)
    def _(ps=ps, Hq=Hq, Hkv=Hkv, D=D, L=L):
        args, _ = paged_batch([1, 1, 1], [L - 1, 3, 0], Hq, Hkv, D, ps)
        q, _, _, kp, vp, _, pt, lens, _, _ = args
        sel = [q, kp, vp, pt, lens]

        def ref(a, kw):
            out = np.zeros(a[0].shape)
            for b, S in enumerate(a[4]):
                t = np.arange(S)
                out[b] = sdpa(a[0][b:b + 1], a[1][a[3][b][t // ps], t % ps], a[2][a[3][b][t // ps], t % ps], [S - 1],
                              window=kw.get("window", 0))[0]
            return out
        return (lambda: (sel, {})), ref

    for W in (5, 33):
        @case("paged_attention_decode", f"ps{ps} Hq{Hq} Hkv{Hkv} D{D}, window {W}, pages before it gone",
              tol_cpu=1e-5, tol_gpu=3e-3)
        def _(ps=ps, Hq=Hq, Hkv=Hkv, D=D, L=L, W=W):
            args, _ = paged_batch([1, 1, 1], [L - 1, 3, 0], Hq, Hkv, D, ps)
            q, _, _, kp, vp, _, pt, lens, _, _ = args
            drop_left_pages(pt, lens - 1, W, ps)

            def ref(a, kw):
                out = np.zeros(a[0].shape)
                for b, S in enumerate(a[4]):
                    t = np.arange(max(S - W, 0), S)        # the window's keys only: the pages before it are gone
                    out[b] = sdpa(a[0][b:b + 1], a[1][a[3][b][t // ps], t % ps], a[2][a[3][b][t // ps], t % ps],
                                  [len(t) - 1])[0]
                return out
            return (lambda: ([q, kp, vp, pt, lens], dict(window=W))), ref

VARLEN = [("prefill mix, padded", dict(chunks=[5, 1, 9], starts=[0, 12, 33], pad_rows=1, pad_seqs=1), 16, 8, 2, 128),
          ("prefill, GQA 8:1, hd 64", dict(chunks=[17, 3], starts=[0, 0]), 4, 8, 1, 64),
          ("prefill, several query tiles", dict(chunks=[200, 100], starts=[0, 50], pad_rows=3), 32, 32, 8, 128),
          ("decode B4, padded", dict(chunks=[1, 1, 1], starts=[40, 0, 7], decode=True, pad_seqs=1, pad_rows=1), 8, 4, 4, 128),
          ("decode B2 page size 1", dict(chunks=[1, 1], starts=[9, 2], decode=True), 1, 16, 8, 64)]
for name, spec, ps, Hq, Hkv, D in VARLEN:
    @case("paged_attention_varlen", name, tol_cpu=1e-5, tol_gpu=3e-3)
    def _(spec=spec, ps=ps, Hq=Hq, Hkv=Hkv, D=D):
        return (lambda: paged_batch(Hq=Hq, Hkv=Hkv, D=D, page_size=ps, **spec)), \
               (lambda a, kw: varlen_ref(a, kw)[0])

# Mistral's sliding window (chapter 09): every row sees its last W keys; the pages wholly before a
# sequence's first row's window are gone (-1 in its table), as the KV cache leaves them
for (name, spec, ps, Hq, Hkv, D), W in [(VARLEN[0], 6), (VARLEN[1], 6), (VARLEN[2], 6), (VARLEN[2], 70),
                                        (VARLEN[2], 150), (VARLEN[3], 6), (VARLEN[3], 33), (VARLEN[4], 3)]:
    @case("paged_attention_varlen", f"{name}, window {W}", tol_cpu=1e-5, tol_gpu=3e-3)
    def _(spec=spec, ps=ps, Hq=Hq, Hkv=Hkv, D=D, W=W):
        def make():
            args, attrs = paged_batch(Hq=Hq, Hkv=Hkv, D=D, page_size=ps, **spec)
            _, _, _, _, _, _, pt, lens, cu, pos = args
            first = np.array([pos[cu[b]] if cu[b + 1] > cu[b] else lens[b] for b in range(len(lens))])
            drop_left_pages(pt, first, W, ps)
            return args, {**attrs, "window": W}
        return make, (lambda a, kw: varlen_ref(a, kw)[0])


Q8_DECODE = [("decode B4, padded, one split", dict(chunks=[1, 1, 1], starts=[40, 0, 7], pad_seqs=1, pad_rows=1), 8, 4, 4, 128),
             ("decode B3, GQA 4:1, hd 64, three splits", dict(chunks=[1, 1, 1], starts=[300, 41, 0]), 16, 8, 2, 64),
             ("decode B2, hd 32, page size 1", dict(chunks=[1, 1], starts=[9, 2]), 1, 4, 2, 32)]
for name, spec, ps, Hq, Hkv, D in Q8_DECODE:
    @case("paged_attention_q8", name, tol_gpu=5e-3, gpu_only=True)
    def _(spec=spec, ps=ps, Hq=Hq, Hkv=Hkv, D=D):
        args, _ = paged_batch(Hq=Hq, Hkv=Hkv, D=D, page_size=ps, decode=True, **spec)
        return (lambda: (args, {})), (lambda a, kw: varlen_ref(a, dict(decode=True))[0].reshape(len(a[0]), -1))

    @case("paged_attention_q8", name + ", window 9", tol_gpu=5e-3, gpu_only=True)
    def _(spec=spec, ps=ps, Hq=Hq, Hkv=Hkv, D=D):
        args, _ = paged_batch(Hq=Hq, Hkv=Hkv, D=D, page_size=ps, decode=True, **spec)
        drop_left_pages(args[6], args[9], 9, ps)
        return (lambda: (args, dict(window=9))), \
               (lambda a, kw: varlen_ref(a, dict(decode=True, window=9))[0].reshape(len(a[0]), -1))


@pytest.mark.gpu
@pytest.mark.parametrize("name,spec,ps,Hq,Hkv,D", Q8_DECODE, ids=[c[0] for c in Q8_DECODE])
def test_paged_attention_q8_is_the_decode_output_quantized(name, spec, ps, Hq, Hkv, D):
    """To the bit what the f32 decode output becomes under the activation quantization (numpy's
    pack_q8 of the GPU's own f32 result), with one split and with several; the pages it stores are
    the f32 op's."""
    args, _ = paged_batch(Hq=Hq, Hkv=Hkv, D=D, page_size=ps, decode=True, **spec)
    d32, d8 = [to_device(a) for a in args], [to_device(a) for a in args]
    f = host(OPS.get("paged_attention_varlen", "cuda")(*d32, decode=True))
    packed = host(OPS.get("paged_attention_q8", "cuda")(*d8))
    assert packed.dtype == np.int8 and np.array_equal(packed, pack_q8(f.reshape(len(f), -1)))
    assert np.array_equal(host(d8[3]), host(d32[3])) and np.array_equal(host(d8[4]), host(d32[4]))


@case("kv_store", "f16 pages, a padding slot", tol_cpu=0, tol_gpu=0)
def _():
    args, _ = paged_batch([4, 2], [0, 5], 4, 2, 64, 8, pad_rows=1)
    _, k, v, kp, vp, slots, *_ = args
    return (lambda: ([k, v, kp, vp, slots], {})), (lambda a, kw: varlen_ref(
        [np.zeros((len(a[0]), 2, 64)), a[0], a[1], a[2], a[3], a[4], np.zeros((0, 1), np.int32),
         np.zeros(0, np.int32), np.zeros(1, np.int32), np.zeros(len(a[0]), np.int32)], kw)[1])


@case("kv_store", "slots past the pages are not stored", tol_cpu=0, tol_gpu=0)
def _():
    args, _ = paged_batch([5], [3], 4, 2, 32, 4)
    _, k, v, kp, vp, slots, *_ = args
    n = kp.shape[0] * kp.shape[1]
    bad = slots.copy()
    bad[[0, 2, 4]] = [n, n + 7, 2**31 - 1]                   # hostile slots: no write outside the pages
    kept = np.where(bad < n, bad, -1).astype(np.int32)       # what they mean: nothing stored
    return (lambda: ([k, v, kp, vp, bad], {})), (lambda a, kw: varlen_ref(
        [np.zeros((len(a[0]), 2, 32)), a[0], a[1], a[2], a[3], kept, np.zeros((0, 1), np.int32),
         np.zeros(0, np.int32), np.zeros(1, np.int32), np.zeros(len(a[0]), np.int32)], kw)[1])


# ---- running a case -------------------------------------------------------------------------------
def to_device(a):
    "numpy arrays and host Tensors to 'cuda' Tensors (ints and other attrs as they are)."
    if isinstance(a, np.ndarray):
        return Tensor.from_numpy(np.ascontiguousarray(a)).to("cuda")
    if isinstance(a, Tensor):
        return a.to("cuda")
    return a


def host(x) -> np.ndarray:
    if isinstance(x, tuple):
        x = x[0]
    if isinstance(x, Tensor):
        if x.device == "cuda":
            x = x.to("cpu")
        d = x.dtype.name
        a = x.numpy()
        return (a.astype(np.uint32) << 16).view(np.float32) if d == "BF16" else np.asarray(a)
    return np.asarray(x)


def result(op, args, out):
    "What an op call means: its output, and for the store ops the pages it wrote."
    if op == "kv_store":
        return host(args[2]).astype(np.float64)
    if op == "qk_norm_rope_store":                  # its output, then the pages it wrote
        return np.concatenate([host(out).ravel(), host(args[6]).ravel(), host(args[7]).ravel()]).astype(np.float64)
    if op in ("rmsnorm_q8", "paged_attention_q8"):   # packed int8 activations: what they stand for
        return unpack_q8(host(out))
    return host(out).astype(np.float64)


def rel(got, want) -> float:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert np.isfinite(got).all(), "non-finite values: an unwritten output?"
    return float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))


def call(op, backend, args, attrs):
    fn = OPS.get(op, backend)
    if backend == "cuda":
        args = [to_device(a) for a in args]
    else:
        args = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    out = fn(*args, **attrs)
    return result(op, args, out)


def ids(c):
    return f"{c['op']}: {c['name']}"


@pytest.mark.parametrize("c", [c for c in CASES if not c["gpu_only"]], ids=ids)
def test_cpu_op_against_its_reference(c):
    args, attrs = c["make"]()
    got = call(c["op"], "cpu", args, attrs)
    want = c["ref"]([a.copy() if isinstance(a, np.ndarray) else a for a in args], attrs)
    assert rel(got, want) <= c["tol_cpu"] + 1e-12


@pytest.mark.gpu
@pytest.mark.parametrize("c", [c for c in CASES if not c["cpu_only"]], ids=ids)
def test_cuda_op_keeps_the_cpu_contract(c):
    if not OPS.has(c["op"], "cuda"):
        pytest.skip(f"{c['op']} has no cuda implementation")
    args, attrs = c["make"]()
    got = call(c["op"], "cuda", args, attrs)
    if c["gpu_only"] or not OPS.has(c["op"], "cpu"):
        want = c["ref"]([a.copy() if isinstance(a, np.ndarray) else a for a in args], attrs)
    else:
        want = call(c["op"], "cpu", args, attrs)
    err = rel(got, want)
    print(f"{c['op']:24s} {c['name']:44s} rel err {err:.1e}")
    assert err <= c["tol_gpu"] + 1e-12, err


@pytest.mark.parametrize("backend", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_every_registered_op_has_a_contract_case(backend):
    covered = {c["op"] for c in CASES}
    missing = sorted(set(OPS.ops(backend)) - covered)
    assert not missing, f"ops registered on {backend!r} without a case here: {missing}"
