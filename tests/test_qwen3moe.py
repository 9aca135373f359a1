"""Qwen3-MoE on the CPU against HF transformers' Qwen3MoeForCausalLM float32 (chapter 08d): random
models of several shapes (experts 8-64, top-k 1-8, the renormalisation on and off, tied and not),
written as GGUF the way llama.cpp's converter stacks the experts, and saved as HF folders."""
import json

import numpy as np
import pytest
import torch

import tffedu
import tffedu.model
from tffedu.config import ModelConfig, config_from_gguf, config_from_hf, weight_shapes
from tffedu.errors import ConfigError, SafetensorsError
from hf_models import hf_logits, rel_err, save_bf16, tiny_qwen3moe, write_gguf
from test_sliding_window import argmax_chain

TOL = 1e-4
PROMPT = [11, 250, 3, 499, 17, 17, 64, 128, 5, 300, 42, 7, 8, 9]

CASES = {   # name -> (kwargs, weight type)
    "e8-k2-norm": (dict(experts=8, top_k=2), "F32"),
    "e16-k4-raw-tied": (dict(experts=16, top_k=4, norm_topk_prob=False, tied=True), "F32"),
    "e64-k8-Q8_0": (dict(experts=64, top_k=8, expert_ffn=32, layers=3), "Q8_0"),
    "e8-k1-BF16": (dict(experts=8, top_k=1, hidden=96, heads=6, kv_heads=2), "BF16"),
}


@pytest.fixture(scope="module", params=list(CASES))
def pair(request, tmp_path_factory):
    kw, wtype = CASES[request.param]
    hf = tiny_qwen3moe(seed=len(request.param), **kw)
    return hf, write_gguf(hf, tmp_path_factory.mktemp("gguf") / f"{request.param}.gguf", wtype)


def test_logits_match_hf(pair):
    hf, path = pair
    ref = hf_logits(hf, PROMPT)
    for m in (tffedu.model.load(path), tffedu.load(path)):
        c = m.config
        assert (c.arch, c.n_expert, c.n_expert_used, c.norm_topk_prob) == (
            "qwen3moe", hf.config.num_experts, hf.config.num_experts_per_tok, hf.config.norm_topk_prob)
        assert rel_err(m.logits(PROMPT), ref) < TOL


def test_greedy_decode_and_batches(pair):
    hf, path = pair
    m = tffedu.load(path)
    assert m.generate(PROMPT[:5], max_new_tokens=12, ignore_eos=True).tokens == argmax_chain(hf, PROMPT[:5], 12)
    prompts = [PROMPT[:2], PROMPT[:9], PROMPT[3:]]
    alone = [m.generate(p, max_new_tokens=6, ignore_eos=True).tokens for p in prompts]
    assert [g.tokens for g in m.generate_batch(prompts, max_new_tokens=6, ignore_eos=True)] == alone
    c = tffedu.model.load(path)
    full = c.logits(PROMPT)
    steps = [c.forward(PROMPT[:6], 0)[-1].copy()] + [c.forward([t], 6 + i)[0].copy() for i, t in enumerate(PROMPT[6:])]
    assert rel_err(np.stack(steps), full[5:]) < 1e-5


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_hf_folder_stacks_the_experts(tmp_path, dtype):
    hf = tiny_qwen3moe(seed=6, experts=8, top_k=2)
    if dtype == "bfloat16":
        save_bf16(hf, tmp_path, max_shard_size="20KB")   # experts across shards
    else:
        hf.save_pretrained(tmp_path)
    m = tffedu.load(tmp_path)
    assert m.source.shape("blk.1.ffn_down_exps.weight") == (8, 64, 32)
    assert rel_err(m.logits(PROMPT), hf_logits(hf, PROMPT)) < TOL


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_hf_folder_with_fused_experts(tmp_path, dtype):
    """transformers 5's own layout (`save_original_format=False`): each layer's experts as two 3-D
    tensors, `gate_up_proj` [E, 2F, D] (gate's rows, then up's) and `down_proj` [E, D, F]."""
    from safetensors import safe_open
    hf = tiny_qwen3moe(seed=8, experts=8, top_k=2)
    if dtype == "bfloat16":
        with torch.no_grad():
            for p in hf.parameters():
                p.copy_(p.to(torch.bfloat16).float())        # the reference computes on the rounded weights
        hf.to(torch.bfloat16).save_pretrained(tmp_path, save_original_format=False)
        hf.float()
        hf.model.rotary_emb = type(hf.model.rotary_emb)(hf.config)
    else:
        hf.save_pretrained(tmp_path, save_original_format=False)
    with safe_open(str(tmp_path / "model.safetensors"), "np") as f:
        assert "model.layers.0.mlp.experts.gate_up_proj" in f.keys()     # the layout under test
    m = tffedu.load(tmp_path)
    assert m.source.shape("blk.1.ffn_gate_exps.weight") == m.source.shape("blk.1.ffn_up_exps.weight") == (8, 32, 64)
    assert "blk.1.ffn_gate_up_exps.weight" not in m.source.tensor_names
    assert rel_err(m.logits(PROMPT), hf_logits(hf, PROMPT)) < (TOL if dtype == "float32" else 2e-3)


def test_fused_experts_that_do_not_fit_are_named(tmp_path):
    "An odd fused row count, and both layouts of one layer in a folder: SafetensorsError naming the tensor."
    from safetensors.torch import load_file, save_file
    hf = tiny_qwen3moe(seed=9, experts=4, top_k=2, layers=1)
    hf.save_pretrained(tmp_path, save_original_format=False)
    fused = load_file(tmp_path / "model.safetensors")
    bad = dict(fused, **{"model.layers.0.mlp.experts.gate_up_proj": fused["model.layers.0.mlp.experts.gate_up_proj"][:, 1:].contiguous()})
    save_file(bad, tmp_path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(SafetensorsError, match="gate_up_proj must be"):
        tffedu.load(tmp_path)
    both = dict(fused, **{f"model.layers.0.mlp.experts.{e}.{p}_proj.weight": torch.zeros(1) for e in range(4)
                          for p in ("gate", "up", "down")})
    save_file(both, tmp_path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(SafetensorsError, match="which to use"):
        tffedu.load(tmp_path)


def test_a_missing_expert_is_named(tmp_path):
    from safetensors.torch import load_file, save_file
    hf = tiny_qwen3moe(seed=7, experts=4, top_k=2, layers=1)
    hf.save_pretrained(tmp_path)
    tensors = load_file(tmp_path / "model.safetensors")
    del tensors["model.layers.0.mlp.experts.2.up_proj.weight"]
    save_file(tensors, tmp_path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(SafetensorsError, match="expert 2 of blk.0.ffn_up_exps.weight is missing"):
        tffedu.load(tmp_path)
    tensors["model.layers.0.mlp.experts.1000000000000.up_proj.weight"] = tensors["model.layers.0.mlp.experts.3.up_proj.weight"].clone()
    tensors["model.layers.0.mlp.experts.2.up_proj.weight"] = tensors.pop("model.layers.0.mlp.experts.3.up_proj.weight")
    save_file(tensors, tmp_path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(SafetensorsError, match="expert 3 of blk.0.ffn_up_exps.weight is missing"):
        tffedu.load(tmp_path)                       # a hostile expert number: named at once, nothing sized by it


def test_the_op_is_the_per_token_definition():
    "chapter 07's moe_ffn (experts grouped) == the router and experts token by token, in float64."
    from tffedu.ops.cpu import moe_ffn
    rng = np.random.default_rng(0)
    for T, D, E, F, k, norm in ((1, 32, 4, 8, 1, True), (37, 64, 16, 24, 4, False), (200, 48, 64, 16, 8, True)):
        x = rng.standard_normal((T, D)).astype(np.float32)
        r, g, u = ((0.3 * rng.standard_normal(s)).astype(np.float32) for s in ((E, D), (E, F, D), (E, F, D)))
        dn = (0.3 * rng.standard_normal((E, D, F))).astype(np.float32)
        ref = np.zeros((T, D))
        for t in range(T):
            lg = r.astype(np.float64) @ x[t]
            p = np.exp(lg - lg.max()); p /= p.sum()
            top = np.argsort(-p, kind="stable")[:k]
            w = p[top] / p[top].sum() if norm else p[top]
            for e, we in zip(top, w):
                a, b = g[e] @ x[t].astype(np.float64), u[e] @ x[t].astype(np.float64)
                ref[t] += we * (dn[e] @ (a / (1 + np.exp(-a)) * b))
        assert rel_err(moe_ffn(x, r, g, u, dn, k=k, norm=norm), ref) < 1e-5


def test_config_readers():
    import transformers
    base = dict(vocab_size=100, hidden_size=64, intermediate_size=96, moe_intermediate_size=32, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, head_dim=16, num_experts=8, num_experts_per_tok=2)
    cfg = json.loads(transformers.Qwen3MoeConfig(**base, norm_topk_prob=True).to_json_string())
    c = config_from_hf(cfg)
    assert (c.arch, c.n_expert, c.n_expert_used, c.expert_ffn_size, c.norm_topk_prob) == ("qwen3moe", 8, 2, 32, True)
    assert config_from_hf({k: v for k, v in cfg.items() if k != "num_local_experts"} | {"num_experts": 8}).n_expert == 8
    for bad, match in (({"decoder_sparse_step": 2}, "decoder_sparse_step"), ({"mlp_only_layers": [0]}, "mlp_only_layers"),
                       ({"num_experts_per_tok": 9}, "num_local_experts|num_experts"), ({"norm_topk_prob": "yes"}, "norm_topk_prob")):
        with pytest.raises(ConfigError, match=match):
            config_from_hf({**cfg, **bad})
    meta = {"general.architecture": "qwen3moe", "qwen3moe.block_count": 2, "qwen3moe.embedding_length": 64,
            "qwen3moe.attention.head_count": 4, "qwen3moe.attention.key_length": 16, "qwen3moe.feed_forward_length": 96,
            "qwen3moe.attention.layer_norm_rms_epsilon": 1e-6, "qwen3moe.vocab_size": 100, "qwen3moe.expert_count": 128,
            "qwen3moe.expert_used_count": 8, "qwen3moe.expert_feed_forward_length": 768}
    g = config_from_gguf(meta)
    assert (g.n_expert, g.n_expert_used, g.expert_ffn_size, g.norm_topk_prob) == (128, 8, 768, True)   # llama.cpp: renormalised
    shapes = weight_shapes(g)
    assert shapes["blk.1.ffn_down_exps.weight"] == (128, 64, 768) and "blk.0.ffn_gate.weight" not in shapes
    for bad, match in (({"qwen3moe.expert_used_count": 0}, "expert_count"), ({"qwen3moe.expert_count": 1 << 20}, "expert_count"),
                       ({"qwen3moe.expert_weights_norm": "no"}, "expert_weights_norm")):
        with pytest.raises(ConfigError, match=match):
            config_from_gguf({**meta, **bad})
    llama = {k.replace("qwen3moe", "llama"): v for k, v in meta.items()} | {"general.architecture": "llama"}   # a Mixtral
    with pytest.raises(ConfigError, match="llama model with 128 experts"):
        config_from_gguf(llama)
    with pytest.raises(ConfigError, match="need n_expert > 0"):
        ModelConfig(arch="qwen3", n_layer=1, hidden_size=64, n_head=4, n_head_kv=2, head_dim=16, ffn_size=96,
                    vocab_size=50, context_length=64, rms_eps=1e-6, rope_base=1e4, n_expert_used=2)
