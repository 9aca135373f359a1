"""Chapter 13 exercises: what a step copies (reference: the executor's own layout) and bucket
padding (reference: brute force), and on a GPU the learner's kv_store kernel (reference: numpy
indexing of the same pages)."""
import numpy as np
import pytest

from tffedu.config import ModelConfig
from tffedu.lowering import PagedGraphs
from tffedu.models import create
from tffedu.runner import bucket
from tffedu.runtime import Executor

CFG = ModelConfig(arch="qwen3", n_layer=2, hidden_size=64, n_head=4, n_head_kv=2, head_dim=16, ffn_size=96,
                  vocab_size=50, context_length=256, rms_eps=1e-6, rope_base=1e4, qk_norm=True)


def graphs():
    pg = PagedGraphs(create(CFG, 256, {}), (8, 4, 2, 16))
    return pg, [pg.build(k, n, b, p) for k, n, b, p in
                (("decode", 1, 1, 1), ("decode", 4, 4, 2), ("prefill", 16, 2, 4), ("logits", 8, 1, 2))]


def test_ch13_1_step_input_bytes(impl):
    pg, _ = graphs()
    for B in (1, 2, 4, 16):
        for P in (1, 3, 8, 64):
            ex = Executor(pg.build("decode", B, B, P), "cpu")      # the CPU packs to 64 bytes
            assert impl.step_input_bytes(B, P, 64) == ex.input_bytes, (B, P)
    assert impl.step_input_bytes(1, 1, 256) == 7 * 256


def test_ch13_2_padding(impl):
    rng = np.random.default_rng(0)
    sizes = rng.integers(1, 33, 200).tolist()
    pow2 = [1, 2, 4, 8, 16, 32]
    assert impl.padding(sizes, pow2) == sum(bucket(n) - n for n in sizes)
    assert impl.padding(sizes, list(range(1, 33))) == 0
    assert impl.padding([3, 5], [8, 4]) == 1 + 3
    with pytest.raises(ValueError):
        impl.padding([40], pow2)


@pytest.mark.gpu
def test_ch13_3_kv_store_kernel(impl):
    from kernel_check import launch_file, to_gpu
    path = impl.kv_store_kernel()
    rng = np.random.default_rng(13)
    P, ps, width = 16, 16, 96
    for T in (1, 20, 64):
        slots = rng.choice(P * ps, T, replace=False).astype(np.int32)
        slots[rng.random(T) < 0.2] = -1                             # padding rows of the bucket
        k = rng.standard_normal((T, width)).astype(np.float32)
        pages = rng.standard_normal((P, ps, width)).astype(np.float32)
        got = to_gpu(pages)
        launch_file(path, "kv_store_ex", "PPPiii", (T,), (128,), to_gpu(k), to_gpu(slots), got,
                    np.int32(T), np.int32(width), np.int32(ps))
        want = pages.copy()
        for t, s in enumerate(slots):
            if s >= 0:
                want[s // ps, s % ps] = k[t]
        np.testing.assert_array_equal(got.get(), want, err_msg=f"T={T}")


def _page_and_row_swapped():
    from solutions.ch13 import kv_store_kernel
    from kernel_check import with_mistake
    return with_mistake(kv_store_kernel(), "(size_t)(slot / page_size) * page_size + slot % page_size",
                        "(size_t)(slot % page_size) * page_size + slot / page_size")


WRONG = {
    "test_ch13_3_kv_store_kernel": {"page-row-swapped": {"kv_store_kernel": _page_and_row_swapped}},
    "test_ch13_1_step_input_bytes": {"no cu_seqlens extra": {"step_input_bytes": lambda B, P, align=256: sum(
        -(-4 * n // align) * align for n in (B, B, B, B, B * P, B, B))}},
    "test_ch13_2_padding": {"largest bucket": {"padding": lambda sizes, buckets: sum(max(buckets) - n for n in sizes)}},
}
