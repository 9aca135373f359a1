"""Chapter 12b exercises: the qk-norm + RoPE lowering rule (reference: `lower` on real Qwen3
graphs, and the numbers of the unfused graph) and matmul_cat's planar layout (reference: numpy's
products, each alone and side by side)."""
from dataclasses import replace

import numpy as np
import pytest

from tffedu.config import ModelConfig
from tffedu.factory import OPS
from tffedu.graph import fuse
from tffedu.lowering import PagedGraphs, lower
from tffedu.models import create
from tffedu.runtime import Executor

CFG = ModelConfig(arch="qwen3", n_layer=2, hidden_size=64, n_head=4, n_head_kv=2, head_dim=16, ffn_size=96,
                  vocab_size=50, context_length=256, rms_eps=1e-6, rope_base=1e4, qk_norm=True)


def graphs():
    pg = PagedGraphs(create(CFG, 256, {}), (8, 4, 2, 16))
    return [pg.build(k, n, b, p) for k, n, b, p in
            (("decode", 1, 1, 1), ("decode", 4, 4, 2), ("prefill", 16, 2, 4), ("logits", 8, 1, 2))]


def _twin(x, w, pos, out=None, eps=1e-6, **rope):
    "The fused op on the CPU: what it replaces, rope(rmsnorm(x, w), pos)."
    y = OPS.get("rmsnorm", "cpu")(x, w, eps=eps)
    return OPS.get("rope", "cpu")(y, pos, out=out, **rope)


def test_ch12b_1_fuse_qk_norm_rope(impl):
    gs = graphs()
    for g in gs:
        mine, ref = fuse(g, [impl.fuse_qk_norm_rope]), lower(g, "cuda")
        assert [(n.name, n.op, [i.name for i in n.inputs], n.attrs) for n in mine.nodes] == \
               [(n.name, n.op, [i.name for i in n.inputs], n.attrs) for n in ref.nodes], g.name
        assert sum(n.op == "qk_norm_rope" for n in mine.nodes) == 2 * CFG.n_layer
    # the lowered graph computes what the unfused one does (on the CPU, with a twin of the fused op)
    g = gs[2]
    rng = np.random.default_rng(1)
    weights = {n.name: (0.2 * rng.standard_normal(n.shape)).astype(np.float32)
               for n in g.nodes if n.kind == "weight"}
    pages = {n.name: np.zeros(n.shape, np.float32) for n in g.nodes if n.kind == "state"}
    feed = dict(ids=rng.integers(0, 50, 16).astype(np.int32), pos=np.r_[np.arange(10), np.arange(6)].astype(np.int32),
                slots=np.r_[np.arange(10), 16 + np.arange(6)].astype(np.int32),
                page_tables=np.array([[0, 1, 2, -1], [4, 5, -1, -1]], np.int32),
                seq_lens=np.array([10, 6], np.int32), cu_seqlens=np.array([0, 10, 16], np.int32),
                last=np.array([9, 15], np.int32))

    class Ops:
        def get(self, op, backend):
            return _twin if op == "qk_norm_rope" else OPS.get(op, backend)
    a = Executor(g, "cpu").bind(weights).bind({k: v.copy() for k, v in pages.items()}).run(feed)["logits"]
    fused = fuse(g, [impl.fuse_qk_norm_rope])
    b = Executor(fused, "cpu", ops=Ops()).bind(weights).bind({k: v.copy() for k, v in pages.items()}).run(feed)["logits"]
    np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


def test_ch12b_2_planar_index(impl):
    """Against numpy: the planar output built from each product alone must hold, at every index the
    answer gives, the element of the products computed side by side."""
    rng = np.random.default_rng(4)
    for T, Ns in ((1, (8, 4, 4)), (3, (5, 2)), (4, (16, 4, 4)), (7, (1, 9, 3))):
        x = rng.standard_normal((T, 6))
        ws = [rng.standard_normal((n, 6)) for n in Ns]
        planar = np.concatenate([(x @ w.T).ravel() for w in ws])      # what matmul_cat writes
        side = x @ np.concatenate(ws).T                                 # [T, sum(Ns)]
        got = np.array([[impl.planar_index(t, n, T, Ns) for n in range(sum(Ns))] for t in range(T)])
        assert sorted(got.ravel().tolist()) == list(range(T * sum(Ns)))  # every element once
        np.testing.assert_allclose(planar[got], side, rtol=1e-12, atol=1e-12)
    with pytest.raises(IndexError):
        impl.planar_index(0, 12, 2, (8, 4))


WRONG = {
    "test_ch12b_1_fuse_qk_norm_rope": {
        "fuses a shared norm": {"fuse_qk_norm_rope": lambda n, users: None if n.op != "rope" or n.inputs[0].op != "rmsnorm"
                                else replace(n, op="qk_norm_rope", inputs=(*n.inputs[0].inputs, n.inputs[1]),
                                             attrs={**n.attrs})}},
    "test_ch12b_2_planar_index": {   # row-major side by side: what a plain matmul over [w0; w1] writes
        "row-major": {"planar_index": lambda t, n, T, Ns: t * sum(Ns) + n},
        "no bounds check": {"planar_index": lambda t, n, T, Ns: _unchecked(t, n, T, Ns)}},
}


def _unchecked(t, n, T, Ns):
    start = 0
    for rows in Ns:
        if n < start + rows:
            return T * start + t * rows + (n - start)
        start += rows
    return T * start + t                                    # past the end: no IndexError
