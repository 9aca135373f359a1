"""Chapter 17 exercises: the split's arithmetic. References: the whole feed-forward in numpy, and
`tffedu.parallel.shards` (itself checked against whole models in tests/test_parallel.py)."""
import dataclasses

import numpy as np
import pytest

from tffedu.config import ModelConfig
from tffedu.errors import ModelError
from tffedu.parallel import shards

BASE = ModelConfig(arch="qwen3", n_layer=1, hidden_size=64, n_head=8, n_head_kv=2, head_dim=8, ffn_size=48,
                   vocab_size=100, context_length=64, rms_eps=1e-6, rope_base=1e6)


def test_ch17_1_split_ffn(impl):
    rng = np.random.default_rng(0)
    for T, D, F, R in [(1, 8, 4, 1), (3, 16, 12, 2), (5, 8, 24, 4), (2, 32, 48, 3)]:
        x, wg, wu, wd = (rng.standard_normal(s) for s in ((T, D), (F, D), (F, D), (D, F)))
        gate = x @ wg.T
        whole = (gate / (1 + np.exp(-gate)) * (x @ wu.T)) @ wd.T
        parts = impl.split_ffn(x, wg, wu, wd, R)
        assert len(parts) == R, (T, D, F, R)
        for p in parts:
            assert np.shape(p) == (T, D), f"a rank's partial output has shape {np.shape(p)}, not {(T, D)}"
        assert np.allclose(sum(parts), whole, atol=1e-9), f"the partial outputs do not sum to the feed-forward (R={R})"
        if R > 1:
            assert not np.allclose(parts[0], whole), "each rank holds a part, not the whole"


def test_ch17_2_kv_heads_of(impl):
    for n_head in (4, 8, 12, 16, 32):
        for n_kv in (1, 2, 3, 4, 8, 16):
            if n_head % n_kv:
                continue
            for R in range(1, 17):
                cfg = dataclasses.replace(BASE, n_head=n_head, n_head_kv=n_kv, ffn_size=48 * 16)
                try:
                    want = [range(*s.kv_heads) for s in shards(cfg, R)]
                except ModelError:
                    for r in range(R):
                        with pytest.raises(ValueError):
                            impl.kv_heads_of(n_head, n_kv, R, r)
                    continue
                got = [impl.kv_heads_of(n_head, n_kv, R, r) for r in range(R)]
                assert got == want, (n_head, n_kv, R, got, want)
