"""ModelConfig from GGUF keys (written with gguf-py's own key helpers) and from HF config.json
(written by transformers' config classes)."""
import json

import gguf
import numpy as np
import pytest
from transformers import LlamaConfig, Qwen3Config

from tffedu.config import ModelConfig, config_from_gguf, config_from_hf, weight_shapes
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
    assert c.to_dict()["arch"] == "llama"


def test_from_hf_errors():
    with pytest.raises(ModelError, match="model_type 'bert'"):
        config_from_hf({"model_type": "bert"})
    with pytest.raises(ModelError, match="'hidden_size' is missing"):
        config_from_hf({"model_type": "llama"})


# ---- the table of architectures, and attention biases -------------------------------------------
def test_one_table_of_architectures():
    """Every architecture fact comes from config.ARCHS: the supported names, the HF model types, and
    the defaults of a config made by hand; each row's creator is found by tffedu.models."""
    import tffedu.models
    from tffedu.config import ARCHS, SUPPORTED_ARCHS
    assert SUPPORTED_ARCHS == tuple(ARCHS) == ("qwen3", "llama", "qwen2", "qwen3moe", "gemma3")
    for name, a in ARCHS.items():
        assert a.name == name and a.rope_type in ("neox", "norm")
        cls = tffedu.models.creator(name)
        assert isinstance(cls, type) and callable(cls.build_graph)
        c = ModelConfig(arch=name, n_layer=1, hidden_size=64, n_head=4, n_head_kv=2, head_dim=16,
                        ffn_size=96, vocab_size=50, context_length=64, rms_eps=1e-6, rope_base=1e4)
        assert (c.rope_type, c.qk_norm, c.attn_bias) == (a.rope_type, a.qk_norm, a.attn_bias)
        assert tffedu.models.create(c, 8).cfg is c
        for mt in a.hf_model_types:
            assert config_from_hf({"model_type": mt, "hidden_size": 64, "num_attention_heads": 4,
                                   "num_hidden_layers": 1, "intermediate_size": 96,
                                   "vocab_size": 50}).arch == name
    # what transformers' own classes say about their architectures: q/k norms, and the biases a
    # model of it has with its config's defaults
    import transformers
    from tffedu.config import ATTN_PROJ
    hf_proj = dict(zip(ATTN_PROJ, ("q_proj", "k_proj", "v_proj", "o_proj")))
    for name, a in ARCHS.items():
        cfg = transformers.AutoConfig.for_model(a.hf_model_types[0], vocab_size=50, hidden_size=64,
                                                intermediate_size=96, num_hidden_layers=1,
                                                num_attention_heads=4, num_key_value_heads=2)
        layer = transformers.AutoModelForCausalLM.from_config(cfg).model.layers[0]
        attn = layer.self_attn
        assert hasattr(attn, "q_norm") == a.qk_norm, name
        assert tuple(p for p in ATTN_PROJ if getattr(attn, hf_proj[p]).bias is not None) == a.attn_bias, name
        assert hasattr(layer, "post_feedforward_layernorm") == a.post_norms, name   # Gemma 3's norms after
    with pytest.raises(ModelError, match="'gpt2' has no model creator"):
        tffedu.models.creator("gpt2")
    with pytest.raises(ModelError, match="not supported"):
        ModelConfig(arch="gpt2", n_layer=1, hidden_size=64, n_head=4, n_head_kv=2, head_dim=16, ffn_size=96,
                    vocab_size=50, context_length=64, rms_eps=1e-6, rope_base=1e4)


def test_layers_config_below_models():
    """config never imports the model builders (it names them); tffedu.models imports a creator's
    module only when asked for it."""
    import subprocess
    import sys
    code = ("import sys, tffedu.config; a = 'tffedu.models' in sys.modules; import tffedu.models as M; "
            "b = 'tffedu.models.qwen3' in sys.modules; M.creator('llama'); "
            "print(a, b, 'tffedu.models.qwen3' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False", "True"]


def test_attention_bias_from_hf():
    "transformers' attention_bias puts a bias on q, k, v and o (its modeling code); mlp_bias is refused."
    from tffedu.config import ATTN_PROJ
    kw = dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
              intermediate_size=96, num_hidden_layers=2, vocab_size=50)
    for Config in (Qwen3Config, LlamaConfig):
        assert config_from_hf(json.loads(Config(**kw).to_json_string())).attn_bias == ()
        c = config_from_hf(json.loads(Config(attention_bias=True, **kw).to_json_string()))
        assert c.attn_bias == ATTN_PROJ == ("attn_q", "attn_k", "attn_v", "attn_output")
        shapes = weight_shapes(c)
        assert (shapes["blk.1.attn_q.bias"], shapes["blk.1.attn_k.bias"], shapes["blk.1.attn_v.bias"],
                shapes["blk.1.attn_output.bias"]) == ((64,), (32,), (32,), (64,))
    with pytest.raises(ModelError, match="'mlp_bias' is true"):
        config_from_hf(json.loads(LlamaConfig(mlp_bias=True, **kw).to_json_string()))


def test_attention_bias_from_gguf_tensors(tmp_path):
    """A GGUF's bias tensors (llama.cpp's names, written by gguf-py) give the config its biases; the
    file's tensors are then checked against them: present in every block, one value per row, and no
    bias the config would not add."""
    from tffedu.config import check_tensors, weight_shapes
    w = gguf.GGUFWriter(str(tmp_path / "b.gguf"), "llama")
    w.add_block_count(2); w.add_embedding_length(64); w.add_feed_forward_length(96)
    w.add_head_count(4); w.add_head_count_kv(2); w.add_layer_norm_rms_eps(1e-5)
    w.add_tensor("token_embd.weight", np.zeros((50, 64), np.float32))
    for name in ("attn_q", "attn_k", "attn_v"):       # Qwen2's three
        w.add_tensor(f"blk.0.{name}.bias", np.zeros(64 if name == "attn_q" else 32, np.float32))
    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
    with GGUFFile(tmp_path / "b.gguf") as f:
        c = config_from_gguf(f.metadata, f.tensors)
    assert c.attn_bias == ("attn_q", "attn_k", "attn_v") and c.rope_type == "norm"
    full = weight_shapes(c)
    assert full["blk.1.attn_k.bias"] == (32,) and "blk.0.attn_output.bias" not in full
    check_tensors(c, full)
    with pytest.raises(ModelError, match=r"'blk.1.attn_k.bias' has shape \[64\], the config needs \[32\] "
                                         r"\(n_head_kv\*head_dim\)"):
        check_tensors(c, {**full, "blk.1.attn_k.bias": (64,)})
    with pytest.raises(ModelError, match="lacks 1 weight.*blk.1.attn_v.bias"):
        check_tensors(c, {n: s for n, s in full.items() if n != "blk.1.attn_v.bias"})
    with pytest.raises(ModelError, match="'blk.0.attn_output.bias' is a bias the config does not have"):
        check_tensors(c, {**full, "blk.0.attn_output.bias": (64,)})


@pytest.mark.parametrize("value", [("attn_q", "ffn_up"), "attn_q", [1], 0])
def test_attn_bias_must_name_projections(value):
    with pytest.raises(ModelError, match="attn_bias must name projections"):
        ModelConfig(arch="llama", n_layer=1, hidden_size=64, n_head=4, n_head_kv=2, head_dim=16, ffn_size=96,
                    vocab_size=50, context_length=64, rms_eps=1e-6, rope_base=1e4, attn_bias=value)
