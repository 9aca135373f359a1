"""HF folders as people have them, against transformers loading the same folder (float32): config.json
keys that transformers fills in or ignores per model type, and safetensors headers the reference
library (safetensors' own reader) refuses."""
import json
import struct

import numpy as np
import pytest
import torch
import transformers

import tffedu
from tffedu.errors import ConfigError, SafetensorsError
from tffedu.safetensors import SafetensorsFile
from hf_models import hf_logits, rel_err, tiny_gemma3, tiny_llama, tiny_mistral, tiny_qwen3

TOL = 1e-4
PROMPT = [11, 250, 3, 499, 17, 17, 64, 128, 5, 300, 42]    # 11 tokens: longer than the windows below


def _edit_config(folder, **changes):
    "Rewrite config.json: a value of None removes the key."
    p = folder / "config.json"
    cfg = json.loads(p.read_text())
    for k, v in changes.items():
        if v is None:
            cfg.pop(k, None)
        else:
            cfg[k] = v
    p.write_text(json.dumps(cfg))


def _hf(folder):
    "transformers' own model of the folder (what `AutoModelForCausalLM.from_pretrained` makes of it)."
    return transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()


def test_gemma3_tied_folder_without_the_key(tmp_path):
    """transformers 4.x wrote config.json as the difference from the defaults: a tied Gemma 3 (whose
    class default is tied, google/gemma-3-1b-it) has no `tie_word_embeddings` key and no lm_head. HF
    ties it; tffedu must too, not ask for an output.weight."""
    tiny_gemma3(seed=3).save_pretrained(tmp_path)
    _edit_config(tmp_path, tie_word_embeddings=None, rope_parameters=None, layer_types=None,
                 _sliding_window_pattern=None, rope_theta=1e6, rope_local_base_freq=1e4,
                 sliding_window_pattern=6, transformers_version="4.50.0.dev0")
    hf = _hf(tmp_path)
    assert hf.config.tie_word_embeddings
    m = tffedu.load(tmp_path)
    assert m.config.tied_embeddings
    assert rel_err(m.logits(PROMPT), hf_logits(hf, PROMPT)) < TOL


@pytest.mark.parametrize("build,changes", [
    (tiny_llama, dict(sliding_window=4)),                                # Llama's code has no window
    (tiny_qwen3, dict(sliding_window=4, use_sliding_window=None, layer_types=None)),   # off by default
], ids=["llama", "qwen3-no-switch"])
def test_sliding_window_transformers_ignores(tmp_path, build, changes):
    "A `sliding_window` key that transformers' model of that type does not apply must not be applied."
    build(seed=4).save_pretrained(tmp_path)
    _edit_config(tmp_path, **changes)
    hf = _hf(tmp_path)
    m = tffedu.load(tmp_path)
    assert m.config.sliding_window == 0
    assert rel_err(m.logits(PROMPT), hf_logits(hf, PROMPT)) < TOL


def test_mistral_window_still_applies(tmp_path):
    "The control: Mistral's sliding_window is applied (by HF and by tffedu)."
    tiny_mistral(seed=5, window=4).save_pretrained(tmp_path)
    hf = _hf(tmp_path)
    m = tffedu.load(tmp_path)
    assert m.config.sliding_window == 4
    assert rel_err(m.logits(PROMPT), hf_logits(hf, PROMPT)) < TOL


@pytest.mark.parametrize("build,key,value", [
    (tiny_llama, "hidden_act", "gelu"), (tiny_qwen3, "hidden_act", "relu"),
    (tiny_gemma3, "hidden_activation", "silu"),
])
def test_other_activation_is_refused(tmp_path, build, key, value):
    """transformers runs the MLP with the config's activation (ACT2FN[hidden_act]); tffedu's has one
    per architecture: another must be refused, naming the key, not silently replaced."""
    build(seed=6).save_pretrained(tmp_path)
    _edit_config(tmp_path, **{key: value})
    ref, plain = hf_logits(_hf(tmp_path), PROMPT), None
    assert np.isfinite(ref).all()       # HF runs it: the folder is valid, just not ours
    with pytest.raises(ConfigError, match=f"'{key}' is '{value}'"):
        tffedu.load(tmp_path)


@pytest.mark.parametrize("build,key,value", [
    (tiny_llama, "hidden_act", "silu"), (tiny_llama, "hidden_act", "swish"),
    (tiny_gemma3, "hidden_activation", "gelu_pytorch_tanh"), (tiny_qwen3, "hidden_act", None),
])
def test_own_activation_loads(tmp_path, build, key, value):
    build(seed=7).save_pretrained(tmp_path)
    _edit_config(tmp_path, **{key: value})
    assert rel_err(tffedu.load(tmp_path).logits(PROMPT), hf_logits(_hf(tmp_path), PROMPT)) < TOL


# ---- safetensors headers the reference reader refuses --------------------------------------------
def _file(tmp_path, header: bytes, data: bytes):
    p = tmp_path / "m.safetensors"
    p.write_bytes(struct.pack("<Q", len(header)) + header + data)
    return p


F32_2 = '{"dtype":"F32","shape":[2],"data_offsets":[%d,%d]}'
CASES = {   # name -> (header, data, our message)
    "duplicate name": (('{"w":%s,"w":%s}' % (F32_2 % (0, 8), F32_2 % (8, 16))).encode(), bytes(16),
                       "'w' appears twice"),
    "gap before": (('{"w":%s}' % (F32_2 % (8, 16))).encode(), bytes(16), "bytes 0..8 of the data"),
    "gap between": (('{"a":%s,"b":%s}' % (F32_2 % (0, 8), F32_2 % (12, 20))).encode(), bytes(20),
                    "bytes 8..12 of the data"),
    "trailing bytes": (('{"w":%s}' % (F32_2 % (0, 8))).encode(), bytes(16), "bytes 8..16 of the data"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_header_the_reference_reader_refuses(tmp_path, case):
    """The safetensors library refuses these files (its header validation: every tensor name once,
    the data covered end to end, no gap, nothing after); so must we, naming the problem."""
    from safetensors import SafetensorError, safe_open
    header, data, pattern = CASES[case]
    p = _file(tmp_path, header, data)
    with pytest.raises(SafetensorError):
        with safe_open(str(p), "np"):
            pass
    with pytest.raises(SafetensorsError, match=pattern):
        SafetensorsFile(p)


def test_headers_the_reference_reader_takes(tmp_path):
    "Empty tensors (several at one offset), a header padded with spaces, and a file of no tensors load."
    from safetensors import safe_open
    cases = [(b'{"a":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},'
              b'"b":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},'
              b'"c":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}   ', bytes(8)),
             (b'{"__metadata__":{"format":"pt"}}', b""), (b'{}', b"")]
    for header, data in cases:
        p = _file(tmp_path, header, data)
        with safe_open(str(p), "np") as ref, SafetensorsFile(p) as f:
            assert sorted(f.tensors) == sorted(ref.keys())
            for k in ref.keys():
                assert np.array_equal(f.numpy(k), ref.get_tensor(k))


@pytest.mark.parametrize("q", [{"quant_method": "gptq", "bits": 4}, {"quant_method": "fp8"}, "bitsandbytes"])
def test_a_quantized_folder_is_refused_by_name(tmp_path, q):
    "GPTQ / FP8 / bitsandbytes folders: refused naming the quantization, not 'lacks weights' later."
    tiny_llama(seed=3).save_pretrained(tmp_path)
    _edit_config(tmp_path, quantization_config=q)
    with pytest.raises(ConfigError, match="quantization_config"):
        tffedu.load(tmp_path)


# ---- a sharded folder's index against its shards -------------------------------------------------
def _sharded(folder):
    "A tiny Llama in several shards with model.safetensors.index.json; returns the index's weight_map."
    tiny_llama(seed=8).save_pretrained(folder, max_shard_size="40KB")
    return json.loads((folder / "model.safetensors.index.json").read_text())["weight_map"]


def _write_map(folder, weight_map):
    p = folder / "model.safetensors.index.json"
    spec = json.loads(p.read_text())
    spec["weight_map"] = weight_map
    p.write_text(json.dumps(spec))


def _keys(folder, shard) -> set:
    "The tensors of one shard, as the safetensors library reads its header."
    from safetensors import safe_open
    with safe_open(str(folder / shard), "np") as f:
        return set(f.keys())


def test_index_naming_a_shard_the_folder_lacks(tmp_path):
    "transformers fails opening the file (FileNotFoundError); we name the tensor and the shard."
    wm = _sharded(tmp_path)
    _write_map(tmp_path, {**wm, "model.norm.weight": "model-nope.safetensors"})
    with pytest.raises(FileNotFoundError):
        _hf(tmp_path)
    with pytest.raises(SafetensorsError, match="'model.norm.weight' is in shard 'model-nope.safetensors', "
                                               "which the folder does not have"):
        tffedu.load(tmp_path)


def test_index_naming_the_wrong_shard(tmp_path):
    """The index puts a tensor in a shard whose header (read by the safetensors library) lacks it.
    transformers ignores the index's tensor names (it reads every tensor of the shards named); the
    index and the shards disagree, so we refuse, naming the tensor and the shard."""
    wm = _sharded(tmp_path)
    other = next(s for s in sorted(set(wm.values())) if s != wm["model.norm.weight"])
    assert "model.norm.weight" not in _keys(tmp_path, other)
    _write_map(tmp_path, {**wm, "model.norm.weight": other})
    with pytest.raises(SafetensorsError, match=f"'model.norm.weight' is in shard '{other}', which "
                                               f"does not hold it"):
        tffedu.load(tmp_path)


def test_a_tensor_in_two_shards(tmp_path):
    """A second shard holds another copy of a tensor the index puts elsewhere. transformers keeps the
    copy of the shard it reads last, silently (a `dict.update` per shard); we refuse, naming both."""
    from safetensors.numpy import load_file, save_file
    wm = _sharded(tmp_path)
    home = wm["model.norm.weight"]
    other = next(s for s in sorted(set(wm.values())) if s != home)
    tensors = load_file(tmp_path / other)
    save_file({**tensors, "model.norm.weight": np.full(64, 7, np.float32)}, tmp_path / other,
              metadata={"format": "pt"})
    assert "model.norm.weight" in _keys(tmp_path, home) & _keys(tmp_path, other)
    with pytest.raises(SafetensorsError, match=f"'model.norm.weight' is in shard '{home}', but "
                                               f"'{other}' holds it too"):
        tffedu.load(tmp_path)


def test_a_tensor_the_index_leaves_out(tmp_path):
    "transformers reads every tensor of the shards the index names, listed or not: so do we, same logits."
    wm = _sharded(tmp_path)
    per_shard = {s: [t for t in wm if wm[t] == s] for s in set(wm.values())}
    left_out = next(t for t in sorted(wm) if len(per_shard[wm[t]]) > 1)   # its shard stays named
    _write_map(tmp_path, {t: s for t, s in wm.items() if t != left_out})
    assert rel_err(tffedu.load(tmp_path).logits(PROMPT), hf_logits(_hf(tmp_path), PROMPT)) < TOL


@pytest.mark.parametrize("shard", ["../x.safetensors", "/tmp/x.safetensors", "a/../../x.safetensors"])
def test_index_shard_outside_the_folder(tmp_path, shard):
    "transformers refuses a shard name that leaves the folder (ValueError); so do we."
    wm = _sharded(tmp_path / "m")
    _write_map(tmp_path / "m", {**wm, "model.norm.weight": shard})
    with pytest.raises(ValueError, match="points outside the model directory"):
        _hf(tmp_path / "m")
    with pytest.raises(SafetensorsError, match="must be a plain file name"):
        tffedu.load(tmp_path / "m")


def test_other_safetensors_beside_model_safetensors(tmp_path):
    """A folder with model.safetensors and no index: transformers reads that file alone, whatever else
    lies beside it (an adapter_model.safetensors, a copy of a tensor); so do we, same logits."""
    from safetensors.numpy import save_file
    hf = tiny_llama(seed=10)
    hf.save_pretrained(tmp_path)
    assert (tmp_path / "model.safetensors").is_file() and not (tmp_path / "model.safetensors.index.json").exists()
    save_file({"model.norm.weight": np.full(64, 7, np.float32), "base_model.lora_A.weight": np.ones((4, 64), np.float32)},
              tmp_path / "adapter_model.safetensors", metadata={"format": "pt"})
    assert rel_err(tffedu.load(tmp_path).logits(PROMPT), hf_logits(_hf(tmp_path), PROMPT)) < TOL
