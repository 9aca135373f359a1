"""ModelConfig from GGUF keys (written with gguf-py's own key helpers) and from HF config.json
(written by transformers' config classes)."""
import json

import gguf
import numpy as np
import pytest
from transformers import LlamaConfig, Qwen3Config

from tffedu.config import ModelConfig, config_from_gguf, config_from_hf
from tffedu.modelfile import open_model
from tffedu.errors import ConfigError, GGUFError, ModelError
from tffedu.gguf import GGUFFile


def write_model_gguf(path, arch="qwen3", hidden=1024, n_head=16, n_head_kv=8, head_dim=128,
                     tied=True, vocab=8, extra=None, key_length=True):
    "Real-Qwen3-0.6B-like keys through gguf-py's writer helpers (not our key names)."
    w = gguf.GGUFWriter(str(path), arch)
    w.add_block_count(28); w.add_context_length(40960); w.add_embedding_length(hidden)
    w.add_feed_forward_length(3072); w.add_head_count(n_head); w.add_head_count_kv(n_head_kv)
    if key_length:
        w.add_key_length(head_dim); w.add_value_length(head_dim)
    w.add_rope_freq_base(1e6); w.add_layer_norm_rms_eps(1e-6)
    for k, (v, t) in (extra or {}).items():
        w.add_key_value(k, v, t)
    w.add_tensor("token_embd.weight", np.zeros((vocab, hidden), np.float32))
    if arch == "qwen3":
        w.add_tensor("blk.0.attn_q_norm.weight", np.ones(head_dim, np.float32))
    if not tied:
        w.add_tensor("output.weight", np.zeros((vocab, hidden), np.float16))
    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
    return path


def test_qwen3_06b_like(tmp_path):
    "The keys of Qwen3-0.6B (only two tensors: config_from_gguf reads keys, not weights)."
    path = write_model_gguf(tmp_path / "q.gguf")
    with GGUFFile(path) as f:
        c = config_from_gguf(f.metadata, f.tensors)
    with pytest.raises(ConfigError, match="28 blocks .* tensors for 1 of them"):
        open_model(path)     # as a model the file is incomplete: open_model checks the tensors
    assert (c.arch, c.hidden_size, c.n_head, c.head_dim) == ("qwen3", 1024, 16, 128)
    assert c.head_dim != c.hidden_size // c.n_head and c.q_size == 2048 and c.kv_size == 1024
    assert c.rope_base == 1e6 and c.rope_type == "neox" and c.rope_dim == 128
    assert c.tied_embeddings and c.qk_norm and c.vocab_size == 8 and c.n_layer == 28
    assert c.rms_eps == pytest.approx(1e-6) and c.context_length == 40960 and c.gqa_ratio == 2


def test_untied_output(tmp_path):
    with GGUFFile(write_model_gguf(tmp_path / "u.gguf", tied=False)) as f:
        assert not config_from_gguf(f.metadata, f.tensors).tied_embeddings


def test_llama_defaults(tmp_path):
    "Without attention.key_length, head_dim = hidden / heads; llama rotates adjacent pairs."
    p = write_model_gguf(tmp_path / "l.gguf", arch="llama", hidden=576, n_head=9, n_head_kv=3,
                         key_length=False)
    with GGUFFile(p) as f:
        c = config_from_gguf(f.metadata, f.tensors)
    assert c.head_dim == 64 and c.rope_type == "norm" and not c.qk_norm


def test_smollm2_config():
    from gguf_util import smollm2_reader
    path, ref = smollm2_reader()
    get = lambda k: ref.fields[k].contents()  # noqa: E731
    with open_model(path) as m:
        c = m.config
    assert c.arch == get("general.architecture") == "llama"
    assert c.n_layer == get("llama.block_count") and c.hidden_size == get("llama.embedding_length")
    assert c.n_head == get("llama.attention.head_count") and c.n_head_kv == get("llama.attention.head_count_kv")
    assert c.rope_base == get("llama.rope.freq_base") and c.vocab_size == len(get("tokenizer.ggml.tokens"))
    assert c.tied_embeddings == ("output.weight" not in {t.name for t in ref.tensors})


@pytest.mark.parametrize("key,value,vtype,pattern,err", [
    ("qwen3.block_count", "many", gguf.GGUFValueType.STRING, "'qwen3.block_count' should be int", GGUFError),
    ("qwen3.attention.head_count_kv", 5, gguf.GGUFValueType.UINT32, "not a multiple", ModelError),
    ("qwen3.attention.value_length", 64, gguf.GGUFValueType.UINT32, "value_length", ModelError),
])
def test_bad_keys(tmp_path, key, value, vtype, pattern, err):
    # write_model_gguf's own helper keys come first; override by writing the file by hand
    w = gguf.GGUFWriter(str(tmp_path / "b.gguf"), "qwen3")
    base = {"qwen3.block_count": (2, gguf.GGUFValueType.UINT32),
            "qwen3.embedding_length": (64, gguf.GGUFValueType.UINT32),
            "qwen3.feed_forward_length": (96, gguf.GGUFValueType.UINT32),
            "qwen3.attention.head_count": (4, gguf.GGUFValueType.UINT32),
            "qwen3.attention.layer_norm_rms_epsilon": (1e-6, gguf.GGUFValueType.FLOAT32)}
    base[key] = (value, vtype)
    for k, (v, t) in base.items():
        w.add_key_value(k, v, t)
    w.add_tensor("token_embd.weight", np.zeros((4, 64), np.float32))
    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
    with pytest.raises(err, match=pattern):
        open_model(tmp_path / "b.gguf")


def test_missing_key_and_unknown_arch():
    with pytest.raises(GGUFError, match="'qwen3.block_count' is missing"):
        config_from_gguf({"general.architecture": "qwen3", "qwen3.embedding_length": 8,
                          "qwen3.attention.head_count": 2})
    with pytest.raises(ModelError, match="'gpt2' .* not supported"):
        config_from_gguf({"general.architecture": "gpt2"})
    with pytest.raises(GGUFError, match="general.architecture"):
        config_from_gguf({})


def test_from_hf_qwen3_and_llama():
    q = Qwen3Config(hidden_size=1024, num_attention_heads=16, num_key_value_heads=8, head_dim=128,
                    intermediate_size=3072, num_hidden_layers=28, vocab_size=151936,
                    max_position_embeddings=40960, rope_theta=1e6, rms_norm_eps=1e-6,
                    tie_word_embeddings=True)
    c = config_from_hf(json.loads(q.to_json_string()))
    assert (c.arch, c.head_dim, c.n_head, c.n_head_kv, c.rope_base, c.tied_embeddings) == (
        "qwen3", 128, 16, 8, 1e6, True)
    assert c.qk_norm and c.rope_type == "neox" and c.vocab_size == 151936
    ll = LlamaConfig(hidden_size=576, num_attention_heads=9, num_key_value_heads=3,
                     intermediate_size=1536, num_hidden_layers=30, vocab_size=49152,
                     rope_theta=1e5, tie_word_embeddings=True)
    c = config_from_hf(json.loads(ll.to_json_string()))
    assert (c.head_dim, c.rope_base, c.rope_type, c.qk_norm) == (64, 1e5, "norm", False)
    assert c.to_dict()["arch"] == "llama" and ModelConfig.from_hf is not None


def test_from_hf_errors():
    with pytest.raises(ModelError, match="model_type 'bert'"):
        config_from_hf({"model_type": "bert"})
    with pytest.raises(ModelError, match="'hidden_size' is missing"):
        config_from_hf({"model_type": "llama"})
