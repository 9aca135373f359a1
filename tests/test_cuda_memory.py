"""The CUDA allocator and device tensors (chapter 02); runs only where PyCUDA finds a GPU."""
import gc

import numpy as np
import pytest

from tffedu import memory
from tffedu.errors import DeviceError
from tffedu.memory import MemoryBlock, PoolAllocator, get_allocator, live_blocks
from tffedu.tensor import F16, F32, I32, Q8_0, Tensor

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def drv():
    from tffedu.device import cuda_context, cuda_driver
    cuda_context()
    return cuda_driver()


def test_context_is_the_primary_one(drv):
    from tffedu.device import cuda_available, cuda_context
    assert cuda_available() and cuda_context() is cuda_context()
    assert drv.Context.get_current() is not None


def test_allocator_round_trip(drv):
    alloc = get_allocator("cuda")
    assert alloc.device == "cuda"
    blk = MemoryBlock(1 << 20, "cuda")
    assert blk.host is None and blk.ptr % 256 == 0
    src = np.random.default_rng(0).integers(0, 256, 1 << 20, dtype=np.uint8)
    drv.memcpy_htod(blk.ptr, src)
    back = np.empty_like(src)
    drv.memcpy_dtoh(back, blk.ptr)
    np.testing.assert_array_equal(back, src)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
def test_to_cuda_and_back(drv, dtype):
    a = (np.random.default_rng(1).standard_normal((33, 65)) * 100).astype(dtype)
    g = Tensor.from_numpy(a).to("cuda")
    assert g.device == "cuda" and g.shape == a.shape and g.is_contiguous()
    np.testing.assert_array_equal(g.to("cpu").numpy(), a)
    np.testing.assert_array_equal(g.clone().cpu().numpy(), a)          # device-to-device copy


def test_strided_tensors_cross_the_bus(drv):
    a = np.arange(4 * 6 * 8, dtype=np.float32).reshape(4, 6, 8)
    g = Tensor.from_numpy(a.transpose(2, 0, 1)).to("cuda")             # strided host source
    np.testing.assert_array_equal(g.cpu().numpy(), a.transpose(2, 0, 1))
    v = Tensor.from_numpy(a).to("cuda").permute(1, 2, 0)[1:5, ::2]     # strided device view
    np.testing.assert_array_equal(v.cpu().numpy(), a.transpose(1, 2, 0)[1:5, ::2])
    np.testing.assert_array_equal(v.contiguous().cpu().numpy(), a.transpose(1, 2, 0)[1:5, ::2])


def test_quantized_blocks_and_zeros(drv):
    raw = np.arange(3 * 68, dtype=np.uint8).reshape(3, 68)
    q = Tensor.from_numpy(raw, dtype=Q8_0).to("cuda")
    assert q.shape == (3, 64) and q.nbytes == raw.nbytes
    np.testing.assert_array_equal(q[1:].cpu().numpy(), raw[1:])
    z = Tensor.zeros((5, 7), I32, "cuda")
    np.testing.assert_array_equal(z.cpu().numpy(), np.zeros((5, 7), np.int32))


def test_numpy_of_device_tensor_is_refused(drv):
    g = Tensor.empty((4,), F32, "cuda")
    with pytest.raises(DeviceError, match="to\\('cpu'\\)"):
        g.numpy()
    with pytest.raises(DeviceError):
        g.storage.host_array()


def test_free_on_last_reference(drv):
    gc.collect()
    size = 512 << 20
    free0, _ = drv.mem_get_info()
    t = Tensor.empty((size // 2,), F16, "cuda")
    v = t[10:]
    bid = t.storage.id
    free1, _ = drv.mem_get_info()
    assert free0 - free1 >= size
    del t
    assert bid in {i.id for i in live_blocks("cuda")}        # the view still holds it
    del v                                                    # no gc.collect(): refcount alone
    free2, _ = drv.mem_get_info()
    assert bid not in {i.id for i in live_blocks("cuda")}
    assert free2 - free1 >= size


def test_summary_counts_device_memory(drv):
    before = memory.memory_summary().get(("cuda", "F32"), (0, 0))
    t = Tensor.empty((1000,), F32, "cuda")
    after = memory.memory_summary()[("cuda", "F32")]
    assert (after[0] - before[0], after[1] - before[1]) == (1, 4000)
    del t


def test_pool_allocator_on_the_gpu(drv):
    arena = PoolAllocator(1 << 20, "cuda", pool="best")
    a = Tensor.from_numpy(np.arange(1000, dtype=np.float32))
    ts = [Tensor.empty((1000,), F32, "cuda", allocator=arena) for _ in range(3)]
    for i, t in enumerate(ts):
        drv.memcpy_htod(t.data_ptr(), a.numpy() + i)
    for i, t in enumerate(ts):
        np.testing.assert_array_equal(t.cpu().numpy(), a.numpy() + i)
    del ts, t
    assert arena.pool.n_live == 0
