"""Chapter 10's CUDA kernels against numpy references (run on the GPU machine; skipped elsewhere).

Every op is called through its registered launcher with fresh random inputs, odd shapes
included, on an output poisoned with NaN, and compared with a float64 numpy reference (for Q8_0,
gguf-py's dequantizer).
"""
import math
import zlib

import numpy as np
import pytest

from tests.conftest import gpu_available

gpu = pytest.mark.gpu


@pytest.fixture(scope="module")
def C():
    import tffedu.ops.cuda as C
    C.context()
    return C


def dev(a, dtype=None):
    "numpy -> a device tensor: a tffedu Tensor on 'cuda' where chapter 02's Tensor exists, else a GPUArray."
    a = np.ascontiguousarray(a)
    try:
        from tffedu.tensor import Tensor
    except ImportError:
        import pycuda.gpuarray as ga
        return ga.to_gpu(a)
    return Tensor.from_numpy(a).to("cuda")


def host(x):
    if hasattr(x, "data_ptr"):
        return np.asarray(x.to("cpu").numpy())
    return x.get()


def poisoned(shape, dtype=np.float32):
    return dev(np.full(shape, np.nan if dtype == np.float32 else -7, dtype))


def rel(got, ref):
    ref = np.asarray(ref, np.float64)
    return float(np.max(np.abs(got.astype(np.float64) - ref)) / max(np.max(np.abs(ref)), 1e-30))


@pytest.fixture
def rng(request):
    return np.random.default_rng(zlib.crc32(request.node.name.encode()))


# ---------------------------------------------------------------- context and errors
@pytest.mark.skipif(gpu_available(), reason="checks the no-GPU error path")
def test_no_gpu_gives_device_error(monkeypatch):
    import sys
    import tffedu.ops.cuda as C
    from tffedu.errors import DeviceError
    monkeypatch.setitem(sys.modules, "pycuda", None)
    monkeypatch.setitem(sys.modules, "pycuda.driver", None)
    with pytest.raises(DeviceError):
        C.context()
    with pytest.raises(DeviceError):
        C.load_kernel("rmsnorm.cu", "rmsnorm_v3")


def test_import_does_not_touch_pycuda():
    import subprocess
    import sys
    code = "import sys, tffedu.ops.cuda, tffedu.ops.cuda_attention; print('pycuda' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@gpu
def test_registry_points_at_the_launchers(C):
    from tffedu.factory import OPS
    import tffedu.ops.cuda_attention as A
    import tffedu.ops.cuda_matmul as M
    for name in ("rmsnorm", "rope", "qk_norm_rope", "qk_norm_rope_pair", "swiglu", "add", "softmax", "argmax", "cast"):
        assert OPS.get(name, "cuda") is getattr(C, name)
    assert OPS.get("get_rows", "cuda") is M.embedding      # chapter 11: the lookup kernel of each weight type
    for name in ("attention", "paged_attention", "paged_attention_decode", "kv_store"):
        assert OPS.get(name, "cuda") is getattr(A, name)


@gpu
def test_loader_cache_and_errors(C):
    from tffedu.errors import DeviceError
    f1 = C.load_module("rmsnorm.cu", {"BLOCK": 128})
    assert C.load_module("rmsnorm.cu", {"BLOCK": 128}) is f1
    assert C.load_module("rmsnorm.cu", {"BLOCK": 256}) is not f1
    with pytest.raises(DeviceError, match="no_such"):
        C.load_kernel("rmsnorm.cu", "no_such_kernel")
    with pytest.raises(DeviceError, match="not found"):
        C.load_kernel("missing.cu", "k")


def _kernel_bodies(src: str) -> dict:
    "name -> body text of every function defined in a .cu source (brace matching)."
    import re
    src = re.sub(r"//[^\n]*|/\*.*?\*/", "", src, flags=re.S)
    out = {}
    for m in re.finditer(r"\b(\w+)\s*\([^;{}()]*\)\s*\{", src):
        depth, i = 0, m.end() - 1
        for j in range(i, len(src)):
            depth += {"{": 1, "}": -1}.get(src[j], 0)
            if depth == 0:
                out.setdefault(m.group(1), src[i:j + 1])
                break
    return out


def test_pdl_ready_kernels_wait():
    """Every kernel its source declares PDL_READY (launched so that it may start before the kernel
    before it ends) calls pdl_wait(), itself or through the helpers it calls; and the kernels the
    decode step runs are among them."""
    import re
    from tffedu.ops.cuda import kernels_dir
    ready = {}
    for f in sorted(kernels_dir().glob("*.cu")):
        src = (kernels_dir() / "common.cuh").read_text() + f.read_text()
        bodies = _kernel_bodies(src)

        def waits(name, seen=()):
            body = bodies.get(name, "")
            return "pdl_wait()" in body or any(waits(c, seen + (name,)) for c in re.findall(r"\b(\w+)\s*(?:<[^<>;]*>)?\s*\(", body)
                                                if c in bodies and c not in seen + (name,))
        for name in re.findall(r"^PDL_READY\((\w+)\);", f.read_text(), re.M):
            assert name in bodies, (f.name, name)
            ready[name] = waits(name)
    assert ready and all(ready.values()), [n for n, ok in ready.items() if not ok]
    for name in ("rmsnorm_quantize_q8", "gemv_q8_0_dp4a_cat", "qk_norm_rope_f32", "kv_store", "paged_attn_decode",
                 "gemv_q8_0_dp4a_add", "gemv_q8_0_dp4a_glu", "get_rows_q8_0", "argmax_chunks", "matmul_q8_0_wgmma"):
        assert name in ready, name


@gpu
def test_pdl_flags_and_launch_errors(C):
    from tffedu.errors import ShapeError
    assert C.kernel("argmax.cu", "argmax_rows", "PPii").pdl
    assert not C.kernel("rmsnorm.cu", "rmsnorm_v3", "PPPiif", {"BLOCK": 256}).pdl   # a ladder kernel: never early
    f = C.kernel("argmax.cu", "argmax_rows", "PPii")
    with pytest.raises(ShapeError, match="takes arguments"):
        f.launcher((1,), (32,), None, 0, 0, 1)
    with pytest.raises(ShapeError, match="do not fit"):
        f.launcher((1,), (32,), None, 0, 0, "one", 4)
    with pytest.raises(ShapeError, match="dimensions"):
        f.launcher((0,), (32,), None, 0, 0, 1, 4)


@pytest.mark.parametrize("sig", ["PPii", "128s128s128sPiiiifiPPPiii", "PPPPiiiifillPPPiii", "iPdfq128si"])
def test_kernel_argument_offsets(sig):
    """The offsets `Kernel.prepare` computes once (the launch's kernelParams point there) are where
    struct's native packing puts each argument: every argument reads back from its offset. CPU."""
    import struct
    from tffedu.ops.cuda import Kernel
    k = Kernel(None, None, "k", False).prepare(sig)
    vals = [bytes([i + 1]) * int(c[:-1]) if c.endswith("s") else (i + 1) / 2 if c in "fd" else i + 1
            for i, c in enumerate(k.codes)]
    buf = struct.pack(sig, *vals)
    assert len(k.offsets) == len(vals)
    for o, c, v in zip(k.offsets, k.codes, vals):
        assert struct.unpack_from(c, buf, o)[0] == v, (c, o)


@gpu
@pytest.mark.parametrize("pdl", [True, False])
def test_pdl_chain_eager_and_in_a_graph(C, rng, monkeypatch, pdl):
    """64 adds, each reading what the one before wrote and overwriting what it read (two buffers in
    turn): with PDL every kernel may start before its predecessor ends, so a missing or late
    pdl_wait() shows up here as a wrong sum, eagerly and in a replayed CUDA graph."""
    import pycuda.driver as drv
    monkeypatch.setattr(C, "PDL", pdl)
    n = 1 << 20
    b_host = rng.standard_normal(n).astype(np.float32)
    x0 = rng.standard_normal(n).astype(np.float32)
    buf, b, s = [dev(x0), dev(np.zeros(n, np.float32))], dev(b_host), drv.Stream()
    steps = 64

    def chain():
        for i in range(steps):
            C.add(buf[i % 2], b, out=buf[(i + 1) % 2], stream=s)
    ref = x0.astype(np.float64)
    for _ in range(steps):
        ref = (ref.astype(np.float32) + b_host).astype(np.float64)
    chain()
    s.synchronize()
    assert np.array_equal(host(buf[0]), ref.astype(np.float32))
    g = C.CudaGraph(chain, s)
    for _ in range(3):
        g.replay()
        ref = ref.astype(np.float32)
        for _ in range(steps):
            ref = ref + b_host
    s.synchronize()
    assert np.array_equal(host(buf[0]), ref)


@gpu
def test_timing_and_copy_bandwidth(C):
    gbs = C.copy_bandwidth(1 << 28, reps=5)
    assert 100 < gbs < 20000
    import pycuda.driver as drv
    a = drv.mem_alloc(1 << 26)
    t = C.time_all(lambda: drv.memset_d32(a, 0, 1 << 24), warmup=2, reps=7)
    assert t.shape == (7,) and (t > 0).all()


# ---------------------------------------------------------------- rmsnorm
@gpu
@pytest.mark.parametrize("T,D", [(1, 1), (3, 7), (5, 128), (17, 1000), (9, 4096), (2, 5001), (64, 1024), (3, 2052)])
def test_rmsnorm(C, rng, T, D):
    x = rng.standard_normal((T, D)).astype(np.float32) * 3
    w = rng.standard_normal(D).astype(np.float32)
    out = poisoned((T, D))
    C.rmsnorm(dev(x), dev(w), out=out, eps=1e-5)
    x64 = x.astype(np.float64)
    ref = x64 / np.sqrt((x64 ** 2).mean(-1, keepdims=True) + 1e-5) * w
    assert rel(host(out), ref) < 2e-5


@gpu
def test_rmsnorm_allocates_and_checks(C, rng):
    from tffedu.errors import ShapeError
    x = rng.standard_normal((4, 3, 64)).astype(np.float32)
    w = rng.standard_normal(64).astype(np.float32)
    y = host(C.rmsnorm(dev(x), dev(w)))
    x64 = x.astype(np.float64)
    assert rel(y, x64 / np.sqrt((x64 ** 2).mean(-1, keepdims=True) + 1e-6) * w) < 2e-5
    with pytest.raises(ShapeError, match="w"):
        C.rmsnorm(dev(x), dev(w[:63]))
    with pytest.raises(ShapeError, match="dtype"):
        C.rmsnorm(dev(x.astype(np.float16)), dev(w))


# ---------------------------------------------------------------- rope
def rope_ref(x, pos, theta, mode):
    T, H, Dh = x.shape
    j = np.arange(Dh // 2)
    ang = pos[:, None].astype(np.float64) * theta ** (-2.0 * j / Dh)
    c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    x = x.astype(np.float64)
    if mode == "neox":
        a, b = x[..., :Dh // 2], x[..., Dh // 2:]
        return np.concatenate([a * c - b * s, a * s + b * c], -1)
    a, b = x[..., 0::2], x[..., 1::2]
    y = np.empty_like(x)
    y[..., 0::2], y[..., 1::2] = a * c - b * s, a * s + b * c
    return y


@gpu
@pytest.mark.parametrize("mode", ["neox", "norm"])
@pytest.mark.parametrize("T,H,Dh,theta", [(1, 1, 2, 1e4), (7, 3, 64, 1e4), (33, 5, 128, 1e6), (5, 2, 6, 5e5), (300, 8, 128, 1e6)])
def test_rope(C, rng, mode, T, H, Dh, theta):
    x = rng.standard_normal((T, H, Dh)).astype(np.float32)
    pos = rng.integers(0, 40000, T).astype(np.int32)
    out = poisoned((T, H, Dh))
    C.rope(dev(x), dev(pos), out=out, theta=theta, mode=mode)
    assert np.max(np.abs(host(out) - rope_ref(x, pos, theta, mode))) < 2e-5


@gpu
def test_rope_in_place(C, rng):
    x = rng.standard_normal((9, 4, 128)).astype(np.float32)
    pos = np.arange(100, 109, dtype=np.int32)
    xd = dev(x)
    C.rope(xd, dev(pos), out=xd, theta=1e6)
    assert np.max(np.abs(host(xd) - rope_ref(x, pos, 1e6, "neox"))) < 2e-5


@gpu
@pytest.mark.parametrize("mode", ["neox", "norm"])
@pytest.mark.parametrize("T,H,Dh", [(1, 1, 64), (13, 7, 128), (5, 3, 32), (3, 2, 250)])
def test_qk_norm_rope(C, rng, mode, T, H, Dh):
    x = rng.standard_normal((T, H, Dh)).astype(np.float32) * 4
    w = (1 + 0.3 * rng.standard_normal(Dh)).astype(np.float32)
    pos = rng.integers(0, 5000, T).astype(np.int32)
    out = poisoned((T, H, Dh))
    C.qk_norm_rope(dev(x), dev(w), dev(pos), out=out, eps=1e-6, theta=1e6, mode=mode)
    x64 = x.astype(np.float64)
    normed = x64 / np.sqrt((x64 ** 2).mean(-1, keepdims=True) + 1e-6) * w
    assert np.max(np.abs(host(out) - rope_ref(normed, pos, 1e6, mode))) < 5e-5


@gpu
@pytest.mark.parametrize("mode,T,Hq,Hk,Dh,n_dims", [("neox", 1, 32, 8, 128, None), ("norm", 3, 5, 1, 64, 48),
                                                   ("neox", 17, 4, 4, 32, 16)])
def test_qk_norm_rope_pair(C, rng, mode, T, Hq, Hk, Dh, n_dims):
    """q and k in one launch: q's rows then k's, each equal to its own qk_norm_rope (the same
    arithmetic, so to the bit), and to the float64 reference within the op's tolerance."""
    from tffedu.errors import ShapeError
    q = rng.standard_normal((T, Hq, Dh)).astype(np.float32) * 4
    k = rng.standard_normal((T, Hk, Dh)).astype(np.float32) * 4
    wq, wk = ((1 + 0.3 * rng.standard_normal(Dh)).astype(np.float32) for _ in range(2))
    pos = rng.integers(0, 5000, T).astype(np.int32)
    kw = dict(eps=1e-6, theta=1e6, mode=mode, n_dims=n_dims)
    out = poisoned((T * (Hq + Hk) * Dh,))
    C.qk_norm_rope_pair(dev(q), dev(k), dev(wq), dev(wk), dev(pos), out=out, **kw)
    got = host(out)
    one = [host(C.qk_norm_rope(dev(x), dev(w), dev(pos), **kw)).ravel() for x, w in ((q, wq), (k, wk))]
    assert np.array_equal(got, np.concatenate(one))
    if n_dims is None:
        x64 = q.astype(np.float64)
        normed = x64 / np.sqrt((x64 ** 2).mean(-1, keepdims=True) + 1e-6) * wq
        assert np.max(np.abs(got[:q.size].reshape(q.shape) - rope_ref(normed, pos, 1e6, mode))) < 5e-5
    with pytest.raises(ShapeError, match="k has shape"):
        C.qk_norm_rope_pair(dev(q), dev(k[:, :, :Dh // 2].copy()), dev(wq), dev(wk), dev(pos), **kw)


@gpu
def test_rope_freq_factors(C, rng):
    """Llama 3.1's per-pair factors on the GPU equal the CPU op's (float64 angles on both); one table
    on the device for equal factors; a table of the wrong size, or a factor <= 0 or not finite, is a
    ShapeError naming the op."""
    from tffedu.errors import ShapeError
    from tffedu.ops import cpu
    from tffedu.ops.cuda import _FREQ_FACTORS
    x = rng.standard_normal((6, 4, 128)).astype(np.float32)
    pos = np.array([0, 1, 63, 64, 8191, 131071], np.int32)
    for mode, n in (("neox", 128), ("norm", 64)):
        ff = tuple(np.clip(np.geomspace(0.5, 16, n // 2), 1, 8))
        kw = dict(theta=5e5, mode=mode, n_dims=n, freq_factors=ff)
        got = host(C.rope(dev(x), dev(pos), **kw))
        assert np.max(np.abs(got - cpu.rope(x, pos, **kw))) < 2e-5
        assert np.max(np.abs(got - host(C.rope(dev(x), dev(pos), **dict(kw, freq_factors=()))))) > 0.1
    tables = len(_FREQ_FACTORS)
    C.rope(dev(x), dev(pos), theta=5e5, freq_factors=[float(v) for v in np.clip(np.geomspace(0.5, 16, 64), 1, 8)])
    assert len(_FREQ_FACTORS) == tables
    for bad, what in (((1.0,) * 63, "64 positive"), ((1.0,) * 63 + (0.0,), "positive"),
                      ((1.0,) * 63 + (float("nan"),), "positive"), ((1.0,) * 63 + ("x",), "positive"),
                      (range(10**9), "got 1000000000 values")):
        with pytest.raises(ShapeError, match=f"rope: freq_factors must be .*{what}"):
            C.rope(dev(x), dev(pos), freq_factors=bad)


# ---------------------------------------------------------------- elementwise
@gpu
@pytest.mark.parametrize("shape", [(1,), (7,), (3, 1000), (4096 * 3 + 1,), (64, 4096)])
def test_add_and_swiglu(C, rng, shape):
    a = rng.standard_normal(shape).astype(np.float32) * 5
    b = rng.standard_normal(shape).astype(np.float32)
    o1, o2 = poisoned(shape), poisoned(shape)
    C.add(dev(a), dev(b), out=o1)
    C.swiglu(dev(a), dev(b), out=o2)
    a64 = a.astype(np.float64)
    assert rel(host(o1), a64 + b) < 1e-7
    assert rel(host(o2), a64 / (1 + np.exp(-a64)) * b) < 1e-5


@gpu
@pytest.mark.parametrize("shape", [(1, 1), (3, 1000), (7, 33), (64, 4096), (2, 3, 96), (4096 * 3 + 1, 2)])
def test_add_bias_over_rows(C, rng, shape):
    "add(a [..., N], b [N]): the bias added to every row (the attention biases), against numpy."
    from tffedu.errors import ShapeError
    a = rng.standard_normal(shape).astype(np.float32) * 5
    b = rng.standard_normal(shape[-1]).astype(np.float32)
    out = poisoned(shape)
    C.add(dev(a), dev(b), out=out)
    assert rel(host(out), a.astype(np.float64) + b) < 1e-7
    assert rel(host(C.add(dev(a), dev(b))), a.astype(np.float64) + b) < 1e-7
    with pytest.raises(ShapeError, match="b has shape"):
        C.add(dev(a), dev(np.zeros(shape[-1] + 1, np.float32)))


@gpu
def test_cast_roundtrip(C, rng):
    x = rng.standard_normal((5, 33)).astype(np.float32)
    h = C.cast(dev(x), dtype="F16")
    assert np.array_equal(host(h), x.astype(np.float16))
    assert np.array_equal(host(C.cast(h, dtype="F32")), x.astype(np.float16).astype(np.float32))


# ---------------------------------------------------------------- embedding rows
@gpu
@pytest.mark.parametrize("V,D,T", [(1, 32, 1), (50, 64, 7), (1000, 1024, 33), (300, 2080, 5)])
@pytest.mark.parametrize("dt", ["F32", "F16"])
def test_get_rows_float(C, rng, V, D, T, dt):
    tab = rng.standard_normal((V, D)).astype(np.float32 if dt == "F32" else np.float16)
    ids = rng.integers(0, V, T).astype(np.int32)
    out = poisoned((T, D))
    C.get_rows(dev(tab), dev(ids), out=out)
    assert np.array_equal(host(out), tab[ids].astype(np.float32))


@gpu
@pytest.mark.parametrize("V,D,T", [(3, 32, 2), (100, 64, 17), (1000, 4096, 9)])
def test_get_rows_q8_0(C, rng, V, D, T):
    gguf = pytest.importorskip("gguf")
    from gguf.quants import dequantize, quantize
    T_ = pytest.importorskip("tffedu.tensor")
    tab = rng.standard_normal((V, D)).astype(np.float32)
    raw = quantize(tab, gguf.GGMLQuantizationType.Q8_0)          # gguf-py's quantizer: uint8 [V, D/32*34]
    ref = dequantize(raw, gguf.GGMLQuantizationType.Q8_0)
    ids = rng.integers(0, V, T).astype(np.int32)
    table = T_.Tensor.from_buffer(np.ascontiguousarray(raw), T_.Q8_0, (V, D)).to("cuda")
    out = poisoned((T, D))
    C.get_rows(table, dev(ids), out=out)
    assert np.allclose(host(out), ref[ids], rtol=0, atol=0)


@gpu
def test_get_rows_bad_id_is_nan(C, rng):
    tab = rng.standard_normal((10, 64)).astype(np.float32)
    out = host(C.get_rows(dev(tab), dev(np.array([3, 10, -1], np.int32))))
    assert np.array_equal(out[0], tab[3]) and np.isnan(out[1:]).all()


# ---------------------------------------------------------------- softmax / argmax
@gpu
@pytest.mark.parametrize("T,N", [(1, 1), (3, 17), (5, 1000), (2, 151936), (64, 8193)])
def test_softmax(C, rng, T, N):
    x = (4 * rng.standard_normal((T, N))).astype(np.float32)
    if N > 4:
        x[:, :: max(2, N // 3)] = -np.inf                          # masked entries
    out = poisoned((T, N))
    C.softmax(dev(x), out=out)
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(-1, keepdims=True))
    assert rel(host(out), e / e.sum(-1, keepdims=True)) < 1e-5


@gpu
@pytest.mark.parametrize("T,V", [(1, 1), (3, 17), (7, 151936), (5, 1025)])
def test_argmax(C, rng, T, V):
    x = rng.integers(-5, 5, (T, V)).astype(np.float32)           # many ties: first index wins
    out = poisoned((T,), np.int32)
    C.argmax(dev(x), out=out)
    assert np.array_equal(host(out), np.argmax(x, -1))
    y = rng.standard_normal((T, V)).astype(np.float32)
    assert np.array_equal(host(C.argmax(dev(y))), np.argmax(y, -1))
