"""benchmarks/make_gguf.py: random-weight race files of every type the GPU reads as stored, written
without llama.cpp. Checked with gguf-py (each matrix in the asked type, the weights about 0.02
standard deviation around zero) and by loading the file with tffedu on the CPU."""
import importlib.util
import pathlib

import gguf
import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("make_gguf", ROOT / "benchmarks" / "make_gguf.py")
make_gguf = importlib.util.module_from_spec(spec)
spec.loader.exec_module(make_gguf)


@pytest.mark.parametrize("qtype", sorted(make_gguf.F16_FIELDS))
def test_random_blocks_look_like_trained_weights(qtype):
    raw = make_gguf.random_blocks(qtype, 64, 1024, np.random.default_rng(0))
    w = gguf.quants.dequantize(raw, gguf.GGMLQuantizationType[qtype])
    assert w.shape == (64, 1024) and np.isfinite(w).all()
    assert 0.015 < w.std() < 0.025 and abs(w.mean()) < 0.2 * w.std()


def test_a_q4_k_file_loads_and_runs(tmp_path, monkeypatch):
    import tffedu
    monkeypatch.setitem(make_gguf.MODELS, "tiny", dict(n_layer=1, hidden=256, n_head=2, n_kv=1, head_dim=128,
                                                      ffn=512, tied=False))
    path = make_gguf.write("tiny", tmp_path / "t.gguf", qtype="Q4_K")
    r = gguf.GGUFReader(str(path))
    assert {t.tensor_type.name for t in r.tensors if len(t.shape) == 2} == {"Q4_K"}
    m = tffedu.load(path, n_ctx=64)
    assert np.isfinite(m.logits([1, 2, 3])).all()


def test_a_mixture_of_experts_file_loads_and_runs(tmp_path, monkeypatch):
    "The qwen3-30b-a3b recipe, shrunk: a qwen3moe file whose experts are stacked 3-D Q8_0 tensors."
    import tffedu
    shape = dict(make_gguf.MODELS["qwen3-30b-a3b"], n_layer=1, hidden=256, n_head=2, n_kv=1, experts=8,
                 experts_used=2, expert_ffn=64)
    monkeypatch.setitem(make_gguf.MODELS, "tiny-moe", shape)
    path = make_gguf.write("tiny-moe", tmp_path / "m.gguf")
    r = gguf.GGUFReader(str(path))
    exps = {t.name: (t.tensor_type.name, tuple(int(d) for d in t.shape)) for t in r.tensors if "_exps" in t.name}
    assert exps["blk.0.ffn_down_exps.weight"] == ("Q8_0", (64, 256, 8))          # ggml order: [F, D, E]
    m = tffedu.load(path, n_ctx=64)
    c = m.config
    assert (c.arch, c.n_expert, c.n_expert_used, c.expert_ffn_size, c.norm_topk_prob) == ("qwen3moe", 8, 2, 64, True)
    assert np.isfinite(m.logits([1, 2, 3])).all()


@pytest.mark.parametrize("name,arch", [("qwen2.5-7b", "qwen2"), ("mistral-7b", "llama")])
def test_the_other_families_load_and_run(tmp_path, monkeypatch, name, arch):
    """The Qwen2.5-7B and Mistral-7B recipes, shrunk: a qwen2 file with q/k/v biases (and no q/k norms),
    a llama one; gguf-py reads the architecture and tffedu loads and runs them."""
    import tffedu
    monkeypatch.setitem(make_gguf.MODELS, "tiny", dict(make_gguf.MODELS[name], n_layer=1, hidden=256, n_head=2,
                                                      n_kv=1, ffn=512))
    path = make_gguf.write("tiny", tmp_path / "t.gguf")
    r = gguf.GGUFReader(str(path))
    names = {t.name for t in r.tensors}
    assert bytes(r.fields["general.architecture"].parts[-1]).decode() == arch
    assert ("blk.0.attn_q.bias" in names) == (arch == "qwen2") and "blk.0.attn_q_norm.weight" not in names
    m = tffedu.load(path, n_ctx=64)
    assert m.config.arch == arch and m.config.context_length == 32768
    assert np.isfinite(m.logits([1, 2, 3])).all()
