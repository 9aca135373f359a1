"""Tensor parallelism on simulated ranks (chapter 17): the split model's logits against the whole
model's (chapter 08's contiguous CPU model, itself checked against HF) for every family and rank
count the split allows, and the refusals of the splits it does not."""
import dataclasses
import threading

import numpy as np
import pytest

from hf_models import tiny_gemma3, tiny_llama, tiny_mistral, tiny_qwen2, tiny_qwen3, write_gguf
from tffedu.errors import ModelError, TffeduError
from tffedu.model import load
from tffedu.modelfile import open_model
from tffedu.parallel import SimGroup, SimulatedTP, rank_creator, shards

MODELS = {   # name: (HF model maker, weight type); query/K/V heads chosen so 2 and 4 ranks split them
    "qwen3 4/2 F32": (lambda: tiny_qwen3(hidden=64, heads=4, kv_heads=2, seed=1), "F32"),
    "qwen3 8/8 untied Q8_0": (lambda: tiny_qwen3(hidden=128, heads=8, kv_heads=8, head_dim=16, tied=False,
                                                 seed=2), "Q8_0"),
    "llama 8/2 tied Q8_0": (lambda: tiny_llama(hidden=128, heads=8, kv_heads=2, seed=3), "Q8_0"),
    "llama 4/1 all biases": (lambda: tiny_llama(hidden=64, heads=4, kv_heads=1, seed=4, attention_bias=True), "F32"),
    "qwen2 4/2 q/k/v biases": (lambda: tiny_qwen2(hidden=96, heads=4, kv_heads=2, seed=5), "F32"),
    "mistral 4/2 window 5": (lambda: tiny_mistral(hidden=64, heads=4, kv_heads=2, ffn=128, window=5, seed=6), "F32"),
    "gemma3 4/2 post norms": (lambda: tiny_gemma3(hidden=128, heads=4, kv_heads=2, head_dim=64, ffn=256, window=6,
                                                  seed=7), "F32"),
}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("tp")
    return {name: write_gguf(make(), d / f"m{i}.gguf", wtype) for i, (name, (make, wtype)) in enumerate(MODELS.items())}


@pytest.mark.parametrize("name", MODELS)
def test_split_logits_equal_the_whole_model(files, name):
    ids = np.random.default_rng(0).integers(0, 400, 19)
    whole = load(files[name]).logits(ids.tolist())
    src = open_model(files[name])
    for R in (1, 2, 4):
        got = SimulatedTP(src, R).logits(ids)
        err = np.abs(got - whole).max() / np.abs(whole).max()
        assert got.shape == whole.shape and err <= (0 if R == 1 else 2e-5), (name, R, err)


def test_kv_heads_split_or_copied():
    from tffedu.config import ModelConfig
    c = ModelConfig(arch="qwen3", n_layer=2, hidden_size=64, n_head=8, n_head_kv=2, head_dim=8, ffn_size=64,
                    vocab_size=101, context_length=64, rms_eps=1e-6, rope_base=1e6)
    assert [s.kv_heads for s in shards(c, 2)] == [(0, 1), (1, 2)]
    assert [s.kv_heads for s in shards(c, 8)] == [(0, 1)] * 4 + [(1, 2)] * 4     # copies of the group's head
    assert [s.vocab for s in shards(c, 4)] == [(0, 25), (25, 50), (50, 75), (75, 101)]
    g = rank_creator(c, shards(c, 2)[1], 32, "g").build_graph(3)
    assert sum(n.op == "all_reduce" for n in g.nodes) == 2 * c.n_layer
    assert g["output.weight"].shape == (51, 64) and g["blk.0.attn_output.weight"].shape == (64, 32)
    for bad, ranks, why in [(dict(n_head_kv=3, n_head=6), 2, "K/V heads"), (dict(), 3, "query heads"),
                            (dict(ffn_size=66), 4, "feed-forward"), (dict(n_expert=4, n_expert_used=2,
                                                                       expert_ffn_size=16), 2, "experts")]:
        with pytest.raises(ModelError, match=why):
            shards(dataclasses.replace(c, **bad), ranks)
    for ranks in (0, -1, True, 2.0, "2", None):
        with pytest.raises(TffeduError, match="ranks"):
            shards(c, ranks)


def test_sim_group_gives_every_rank_the_same_sum():
    R, group, outs = 3, SimGroup(3), [None] * 3
    xs = [np.random.default_rng(r).standard_normal((4, 5)).astype(np.float32) for r in range(R)]

    def rank(r):
        out = xs[r].copy()                       # the output in the input's own memory
        outs[r] = group.all_reduce(r, out, out).copy()
    threads = [threading.Thread(target=rank, args=(r,)) for r in range(R)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert all(np.array_equal(o, outs[0]) for o in outs) and np.allclose(outs[0], sum(xs))


def test_a_failing_rank_stops_the_others(files):
    tp = SimulatedTP(open_model(files["qwen3 4/2 F32"]), 2)
    for bad in ([1, 2, 10 ** 6], [], [1.5], "12"):   # checked before any rank starts
        with pytest.raises(TffeduError):
            tp.logits(bad)
    with pytest.raises(ModelError, match="context"):
        tp.logits(list(range(300)))                  # past n_ctx
    w = tp.weights[1].pop("blk.1.ffn_down.weight")   # rank 1 fails in block 1; rank 0 waits for it there
    with pytest.raises(TffeduError, match="ffn_down"):
        tp.logits([1, 2, 3])
    tp.weights[1]["blk.1.ffn_down.weight"] = w
    assert tp.logits([1, 2, 3]).shape[0] == 3        # and the model works again
    ids = [[1, 2, 3], [4, 5, 6, 7]]                  # two threads share the model: one pass at a time
    want = [tp.logits(x) for x in ids]
    got = [None, None]
    threads = [threading.Thread(target=lambda i=i: got.__setitem__(i, tp.logits(ids[i]))) for i in range(2)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert all(np.array_equal(g, w) for g, w in zip(got, want))


@pytest.mark.parametrize("name", ["qwen3 4/2 F32", "llama 8/2 tied Q8_0", "gemma3 4/2 post norms"])
def test_split_greedy_tokens_equal_the_whole_model(files, name):
    """Decode steps on the ranks' own K/V caches: the same greedy tokens as the whole model's loop
    (chapter 08), over 2 and 4 ranks (4: K/V heads copied)."""
    prompt = [5, 99, 401, 12, 7, 300]
    want = load(files[name], n_ctx=64).generate(prompt, max_new_tokens=10, ignore_eos=True).tokens
    for R in (2, 4):
        assert SimulatedTP(open_model(files[name]), R, n_ctx=64).generate(prompt, 10) == want, (name, R)
    tp = SimulatedTP(open_model(files[name]), 2, n_ctx=16)
    assert tp.generate(prompt, 0) == []
    for bad in (-1, 1.5, True, 11):                   # 11: past the context of 16
        with pytest.raises(TffeduError):
            tp.generate(prompt, bad)
