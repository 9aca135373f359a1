"""The layout contract between chapter 09's KVCache and chapter 12's CUDA attention kernels.

The cache (f16 pages, shared prefix pages, a fork, -1-padded batch tables) is read by the CUDA
ops `paged_attention_decode` and `paged_attention`; their results must equal the numpy ops of
chapter 09 on the same pages. GPU machine only (skipped elsewhere).
"""
import numpy as np
import pytest

from tffedu.factory import OPS
from tffedu.kvcache import KVCache, paged_attention, paged_attention_decode

@pytest.mark.gpu
@pytest.mark.parametrize("P", [1, 16, 32])
def test_cuda_kernels_read_this_cache(P):
    "The CUDA ops read f16 pages and -1-padded tables made by KVCache exactly as the numpy ops do."
    from tests.test_cuda_kernels import dev, host
    import tffedu.ops.cuda as C
    C.context()
    rng = np.random.default_rng(P)
    Hq, Hkv, D = 8, 2, 64
    c = KVCache(1, Hkv, D, num_pages=-(-700 // P) + 8, page_size=P, dtype=np.float16)
    prompts = {"a": rng.integers(0, 50, 300).tolist(), "c": [1, 2, 3]}
    prompts["b"] = prompts["a"][:100] + [7] * 37
    for sid, toks in prompts.items():
        n = c.admit(sid, toks)
        k, v = rng.standard_normal((2, len(toks) - n, Hkv, D)).astype(np.float32)
        c.write(sid, 0, n, k, v)
        c.commit(sid, len(toks) - n, toks)
    c.fork("b", "b2")
    c.extend("b2"); c.write("b2", 0, 137, *rng.standard_normal((2, 1, Hkv, D)).astype(np.float32))
    c.commit("b2", 1, prompts["b"] + [9])
    assert c.page_table("b")[0] == c.page_table("a")[0]  # b reuses a's prefix pages
    sids = ["a", "b", "b2", "c"]
    tables, lens = c.batch_tables(sids)
    kp, vp = c.k[0].astype(np.float32), c.v[0].astype(np.float32)
    q = rng.standard_normal((len(sids), Hq, D)).astype(np.float32)
    ref = paged_attention_decode(q, kp, vp, tables, lens)
    got = OPS.get("paged_attention_decode", "cuda")(dev(q), dev(c.k[0]), dev(c.v[0]), dev(tables), dev(lens))
    np.testing.assert_allclose(host(got), ref, atol=2e-3)
    q = rng.standard_normal((5, Hq, D)).astype(np.float32)  # prefill-style: the last 5 tokens of b2
    ref = paged_attention(q, kp, vp, c.page_table("b2"), c.seq_len("b2"))
    got = OPS.get("paged_attention", "cuda")(dev(q), dev(c.k[0]), dev(c.v[0]), dev(c.page_table("b2")),
                                             c.seq_len("b2"))
    np.testing.assert_allclose(host(got), ref, atol=2e-3)
