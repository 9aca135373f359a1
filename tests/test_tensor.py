"""tffedu.tensor (chapter 02): the DType table against gguf-py, Tensor layouts against numpy."""
import mmap

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import tffedu.tensor as T
from tffedu.errors import DeviceError, ShapeError, TffeduError
from tffedu.memory import Allocator, MemoryBlock
from tffedu.tensor import DTYPES, F16, F32, I32, Q4_K, Q8_0, BF16, Tensor, dtype_from_ggml

gguf = pytest.importorskip("gguf")
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType  # noqa: E402

# ---------------------------------------------------------------------------------- DType


def test_interface_constants_exist():
    for name in "F32 F16 BF16 I8 I32 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q4_K Q6_K".split():
        d = getattr(T, name)
        assert d.name == name and DTYPES[name] is d


@pytest.mark.parametrize("name", sorted(n for n, d in DTYPES.items() if d.in_files))
def test_dtype_table_matches_gguf_py(name):
    d = DTYPES[name]
    q = GGMLQuantizationType(d.ggml_id)
    assert q.name == d.name
    assert GGML_QUANT_SIZES[q] == (d.block_size, d.type_size)
    assert d.is_quantized == (d.block_size > 1)
    assert dtype_from_ggml(int(q)) is d
    if not d.is_quantized:
        assert d.np_dtype.itemsize == d.type_size


def test_gguf_types_we_compute_with_are_present():
    # the formats models in the wild are shipped in (and that chapter 03 dequantizes)
    for q in ("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K"):
        assert dtype_from_ggml(GGMLQuantizationType[q].value).name == q


def test_unknown_ggml_id_names_it():
    with pytest.raises(ShapeError, match="999"):
        dtype_from_ggml(999)


def test_nbytes_and_whole_blocks():
    assert Q8_0.nbytes(64) == 68 and Q4_K.nbytes(512) == 288 and F16.nbytes(3) == 6
    with pytest.raises(ShapeError, match="whole blocks"):
        Q8_0.nbytes(33)
    with pytest.raises(ShapeError):
        Q8_0.itemsize


def test_as_dtype():
    assert T.as_dtype("f32") is F32 and T.as_dtype(np.float16) is F16 and T.as_dtype(np.int32) is I32
    with pytest.raises(ShapeError, match="no tffedu dtype"):
        T.as_dtype(np.uint8)


# ---------------------------------------------------------------------------------- making tensors


def test_empty_is_aligned_and_sized():
    for shape in [(1,), (3, 5), (7, 3, 2)]:
        t = Tensor.empty(shape, F16)
        assert t.data_ptr() % 64 == 0
        assert t.numpy().shape == shape and t.numpy().dtype == np.float16
        assert t.nbytes == np.prod(shape) * 2 and t.numel == np.prod(shape)


def test_zeros():
    assert not Tensor.zeros((4, 4), I32).numpy().any()


def test_from_numpy_is_zero_copy():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = Tensor.from_numpy(a)
    assert t.shape == (3, 4) and t.strides == (4, 1) and t.dtype is F32
    assert t.data_ptr() == a.ctypes.data
    t.numpy()[1, 2] = -1
    assert a[1, 2] == -1


def test_from_numpy_strided_is_zero_copy():
    base = np.arange(60, dtype=np.int32).reshape(6, 10)
    a = base[1:5, 2:9:3]
    t = Tensor.from_numpy(a)
    assert t.strides == tuple(s // 4 for s in a.strides)
    np.testing.assert_array_equal(t.numpy(), a)
    assert np.shares_memory(t.numpy(), base)


def test_from_numpy_refuses_negative_strides():
    with pytest.raises(ShapeError, match="negative"):
        Tensor.from_numpy(np.arange(5, dtype=np.float32)[::-1])


def test_from_buffer_bytes_offset_and_bounds():
    a = np.arange(10, dtype=np.float32)
    buf = b"\x00" * 8 + a.tobytes()
    t = Tensor.from_buffer(buf, F32, (2, 5), offset=8)
    np.testing.assert_array_equal(t.numpy(), a.reshape(2, 5))
    assert not t.numpy().flags.writeable  # bytes are immutable
    with pytest.raises(ShapeError, match="buffer has 48"):
        Tensor.from_buffer(buf, F32, (3, 5), offset=8)


def test_from_buffer_mmap_zero_copy(tmp_path):
    a = np.arange(32, dtype=np.float16)
    p = tmp_path / "w.bin"
    p.write_bytes(b"HEAD" + a.tobytes())
    with open(p, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    t = Tensor.from_buffer(mm, F16, (4, 8), offset=4)
    np.testing.assert_array_equal(t.numpy(), a.reshape(4, 8))
    assert np.shares_memory(t.numpy(), np.frombuffer(mm, np.uint8))
    del t


def test_quantized_blocks_against_gguf_quants():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((6, 128)).astype(np.float32)
    raw = gguf.quants.quantize(w, GGMLQuantizationType.Q8_0)     # (6, 4 * 34) uint8
    t = Tensor.from_buffer(raw.tobytes(), Q8_0, w.shape)
    assert t.nbytes == raw.nbytes and t.numpy().shape == raw.shape
    np.testing.assert_array_equal(t.numpy(), raw)
    t2 = Tensor.from_numpy(raw, dtype=Q8_0)
    assert t2.shape == w.shape
    # rows and reshapes keep whole blocks: gguf-py dequantizes what we slice
    rows = t[2:5].reshape(3, 2, 64)
    deq = gguf.quants.dequantize(rows.numpy(), GGMLQuantizationType.Q8_0)
    np.testing.assert_allclose(deq.reshape(3, 128), gguf.quants.dequantize(raw, GGMLQuantizationType.Q8_0)[2:5])


def test_quantized_refuses_cutting_blocks():
    t = Tensor.from_buffer(bytes(4 * 68), Q8_0, (4, 64))
    with pytest.raises(ShapeError, match="blocks"):
        t.transpose(0, 1)
    with pytest.raises(ShapeError, match="inside the blocks"):
        t[:, :32]
    with pytest.raises(ShapeError, match="multiple of 32"):
        Tensor.from_buffer(bytes(4 * 68), Q8_0, (8, 33))


def test_bf16_keeps_bits():
    torch = pytest.importorskip("torch")
    x = torch.randn(4, 8).to(torch.bfloat16)
    bits = x.view(torch.int16).numpy().view(np.uint16)
    t = Tensor.from_numpy(bits, dtype=BF16)
    assert t.dtype is BF16 and t.nbytes == 64
    back = torch.from_numpy(t.numpy().view(np.int16).copy()).view(torch.bfloat16)
    assert torch.equal(back, x)


# ---------------------------------------------------------------------------------- views vs numpy

def _random_chain(draw, ndim_max=4):
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=ndim_max)))
    ops = draw(st.lists(st.sampled_from(["T", "P", "R", "S", "C"]), min_size=1, max_size=6))
    return shape, ops, draw(st.randoms(use_true_random=False))


def _factor(n, rnd, max_dims=4):
    "A random shape with product n."
    dims = []
    while n > 1 and len(dims) < max_dims - 1:
        divs = [d for d in range(2, n + 1) if n % d == 0]
        d = rnd.choice(divs)
        dims.append(d)
        n //= d
    dims.append(n)
    for _ in range(rnd.randint(0, 1)):
        dims.insert(rnd.randint(0, len(dims)), 1)
    rnd.shuffle(dims)
    return tuple(dims)


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_strides_agree_with_numpy_for_random_chains(data):
    shape, ops, rnd = _random_chain(data.draw)
    base = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    a, t = base, Tensor.from_numpy(base.copy())
    tbase = t.numpy()
    for op in ops:
        if op == "T" and a.ndim >= 2:
            i, j = rnd.sample(range(a.ndim), 2)
            a, t = a.swapaxes(i, j), t.transpose(i, j)
        elif op == "P":
            perm = list(range(a.ndim)); rnd.shuffle(perm)
            a, t = a.transpose(perm), t.permute(*perm)
        elif op == "R":
            new = _factor(a.size, rnd)
            a, t = a.reshape(new), t.reshape(new)
        elif op == "S":
            idx = tuple(slice(rnd.randint(0, n - 1), None, rnd.randint(1, 2)) for n in a.shape)
            a, t = a[idx], t[idx]
        elif op == "C":
            a, t = np.ascontiguousarray(a), t.contiguous()
        assert t.shape == a.shape
        assert tuple(s * 4 for s in t.strides) == a.strides, (ops, op)
        np.testing.assert_array_equal(t.numpy(), a)
        assert np.shares_memory(t.numpy(), tbase) == np.shares_memory(a, base)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 5), min_size=1, max_size=4), st.data())
def test_views_share_storage_and_clones_do_not(shape, data):
    t = Tensor.from_numpy(np.zeros(shape, np.float32))
    perm = data.draw(st.permutations(range(len(shape))))
    views = [t.permute(*perm), t.reshape(-1), t.view(*shape), t[tuple(slice(0, n) for n in shape)]]
    for v in views:
        assert v.storage is t.storage
        v.numpy().flat[0] = 7
        assert t.numpy().flat[0] == 7
        t.numpy()[...] = 0
    for c in [t.clone(), t.permute(*perm).clone(), t.permute(*perm).contiguous().clone()]:
        assert c.storage is not t.storage and c.is_contiguous()
        c.numpy().flat[0] = 9
        assert t.numpy().flat[0] == 0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 6), min_size=1, max_size=3), st.data())
def test_indexing_matches_numpy(shape, data):
    a = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
    idx = []
    for n in shape[:data.draw(st.integers(1, len(shape)))]:
        if data.draw(st.booleans()):
            idx.append(data.draw(st.integers(-n, n - 1)))
        else:
            idx.append(slice(data.draw(st.integers(-n, n)), data.draw(st.integers(-n, n)),
                             data.draw(st.integers(1, 3))))
    t = Tensor.from_numpy(a)[tuple(idx)]
    want = a[tuple(idx)]
    assert t.shape == want.shape
    np.testing.assert_array_equal(t.numpy(), want)


def test_view_needs_compatible_strides_reshape_copies():
    t = Tensor.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3)).transpose(0, 1)
    with pytest.raises(ShapeError, match="reshape"):
        t.view(6)
    r = t.reshape(6)
    np.testing.assert_array_equal(r.numpy(), np.arange(6).reshape(2, 3).T.reshape(6))
    assert r.storage is not t.storage


def test_empty_tensors_follow_numpy():
    a = np.zeros((0, 2, 3), np.float32)
    t = Tensor.from_numpy(a).permute(0, 2, 1)
    assert t.is_contiguous() and t.numel == 0 and t.nbytes == 0
    r = t.reshape(3, 0, 2)
    assert r.shape == a.transpose(0, 2, 1).reshape(3, 0, 2).shape
    assert r.numpy().size == 0 and Tensor.empty((0, 4), F32).numpy().shape == (0, 4)


def test_contiguous_is_self_when_contiguous():
    t = Tensor.empty((3, 4), F32)
    assert t.contiguous() is t and t.to("cpu") is t


def test_shape_errors():
    t = Tensor.empty((2, 3), F32)
    for bad in [lambda: t.reshape(4, 2), lambda: t.reshape(-1, -1), lambda: t.permute(0, 0),
                lambda: t.transpose(0, 5), lambda: t[2], lambda: t[:, ::-1], lambda: t[0, 0, 0]]:
        with pytest.raises(ShapeError):
            bad()
    assert issubclass(ShapeError, TffeduError)


def test_bounds_checked_against_block():
    blk = MemoryBlock(16)
    with pytest.raises(ShapeError, match="past the 16-byte block"):
        Tensor(blk, (5,), F32)


# ---------------------------------------------------------------------------------- device rules

class _FakeDeviceAllocator(Allocator):
    "Pretends to be a GPU allocator (no host view) so the CPU tests can check the refusals."
    device = "cuda"

    def allocate(self, nbytes): return 0x7000_0000
    def deallocate(self, raw): pass
    def address(self, raw): return raw


def test_host_access_refused_on_device_tensor():
    t = Tensor(MemoryBlock(64, "cuda", allocator=_FakeDeviceAllocator()), (4, 4), F32)
    assert t.device == "cuda" and t.data_ptr() == 0x7000_0000
    with pytest.raises(DeviceError, match="to\\('cpu'\\)"):
        t.numpy()
    with pytest.raises(DeviceError):
        np.asarray(t)


def test_to_cuda_without_gpu_names_the_reason():
    from tests.conftest import gpu_available
    if gpu_available():
        pytest.skip("a GPU is present")
    with pytest.raises(DeviceError, match="PyCUDA|GPU|driver"):
        Tensor.empty((2,), F32).to("cuda")


def test_unknown_device():
    with pytest.raises(DeviceError, match="tpu"):
        Tensor.empty((2,), F32, device="tpu")
