"""safetensors + HF folders: a random HF model saved with save_pretrained loads with the same
tensors (F32/F16/BF16), under the GGUF names gguf-py's own name map gives, with Llama's Q/K rows
permuted exactly as transformers' GGUF importer undoes; malformed files raise GGUFError."""
import json
import struct

import gguf
import numpy as np
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM, Qwen3Config, Qwen3ForCausalLM
from transformers.modeling_gguf_pytorch_utils import LlamaTensorProcessor

from tffedu.modelfile import detect_format, open_model
from tffedu.errors import GGUFError, ModelError
from tffedu.safetensors import HFModel, SafetensorsFile, inspect_hf

DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}


def tiny(arch: str, tied: bool):
    common = dict(vocab_size=96, hidden_size=64, intermediate_size=80, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                  rms_norm_eps=1e-5, tie_word_embeddings=tied)
    if arch == "qwen3":   # head_dim 32 != 64 / 4, like real Qwen3 (128 != 1024 / 16)
        return Qwen3ForCausalLM(Qwen3Config(head_dim=32, rope_theta=1e6, **common))
    return LlamaForCausalLM(LlamaConfig(rope_theta=5e5, **common))


def bits(t: torch.Tensor) -> np.ndarray:
    "The stored bits of a torch tensor as numpy (bf16 has no numpy dtype: view as int16)."
    t = t.detach().contiguous()
    return t.view(torch.int16).numpy().view(np.uint16) if t.dtype == torch.bfloat16 else t.numpy()


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("arch,tied", [("qwen3", False), ("qwen3", True), ("llama", True),
                                       ("llama", False)])
def test_save_pretrained_roundtrip(tmp_path, arch, tied, dtype):
    torch.manual_seed(0)
    model = tiny(arch, tied).to(DTYPES[dtype])
    model.save_pretrained(tmp_path)
    hf = model.config
    sd = {k: v for k, v in model.state_dict().items()}
    name_map = gguf.get_tensor_name_map(gguf.MODEL_ARCH[arch.upper()], hf.num_hidden_layers)
    undo = LlamaTensorProcessor({"num_attention_heads": hf.num_attention_heads,
                                 "num_key_value_heads": hf.num_key_value_heads})
    assert detect_format(tmp_path) == "hf"
    with open_model(tmp_path) as m:
        assert isinstance(m, HFModel)
        c = m.config
        assert (c.arch, c.n_layer, c.hidden_size, c.n_head, c.n_head_kv, c.ffn_size, c.vocab_size) == (
            arch, hf.num_hidden_layers, hf.hidden_size, hf.num_attention_heads,
            hf.num_key_value_heads, hf.intermediate_size, hf.vocab_size)
        assert c.head_dim == (32 if arch == "qwen3" else 16) and c.tied_embeddings == tied
        assert c.rope_base == (1e6 if arch == "qwen3" else 5e5) and c.qk_norm == (arch == "qwen3")
        expected = set()
        for key, t in sd.items():
            if key == "lm_head.weight" and tied:
                continue
            name = name_map.get_name(key, try_suffixes=(".weight",))   # gguf-py's mapping
            expected.add(name)
            got = m.numpy(name)
            if arch == "llama" and (".attn_q." in name or ".attn_k." in name):
                got = undo.process(got, name).weights      # transformers undoes llama.cpp's permute
                assert not np.array_equal(got, m.numpy(name))
            assert got.shape == tuple(t.shape), name
            assert np.array_equal(got, bits(t)), name
            np.testing.assert_array_equal(undo.process(m.float32(name), name).weights
                                          if arch == "llama" else m.float32(name),
                                          t.float().numpy())
            tt = m.tensor(name)
            assert tt.dtype.name == dtype and tuple(tt.shape) == tuple(t.shape)
            assert np.array_equal(tt.numpy(), m.numpy(name))
        assert set(m.tensor_names) == expected
        assert ("output.weight" in m.tensor_names) == (not tied)


def test_sharded_folder(tmp_path):
    torch.manual_seed(1)
    model = tiny("qwen3", False)
    model.save_pretrained(tmp_path, max_shard_size="20KB")
    assert (tmp_path / "model.safetensors.index.json").exists()
    with HFModel(tmp_path) as m:
        assert len(m.files) > 1
        emb = model.state_dict()["model.embed_tokens.weight"].numpy()
        np.testing.assert_array_equal(m.numpy("token_embd.weight"), emb)
        assert len(m.tensor_names) == len(model.state_dict())
    assert "token_embd.weight" in inspect_hf(tmp_path)


def test_zero_copy_view(tmp_path):
    model = tiny("qwen3", True)
    model.save_pretrained(tmp_path)
    with HFModel(tmp_path) as m:
        f, hf = m._get("blk.0.ffn_up.weight")
        a = m.numpy("blk.0.ffn_up.weight")
        assert not a.flags.owndata and np.shares_memory(a, np.frombuffer(f._mm, np.uint8))


# --- the detector reads content, not names ----------------------------------------------------
def test_detector_ignores_file_names(tmp_path):
    from gguf_util import write_gguf
    g = write_gguf(tmp_path / "model.safetensors", {}, {"w": np.zeros(4, np.float32)})
    assert detect_format(g) == "gguf"
    s = tmp_path / "weights.gguf"
    s.write_bytes(_st({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, bytes(8)))
    assert detect_format(s) == "safetensors"
    r = tmp_path / "x.gguf"
    r.write_bytes(b"hello world, not a model")
    with pytest.raises(GGUFError, match="unknown model format"):
        detect_format(r)
    (tmp_path / "empty").mkdir()
    with pytest.raises(GGUFError, match="without config.json"):
        detect_format(tmp_path / "empty")


# --- malformed safetensors ---------------------------------------------------------------------
def _st(header: dict, data: bytes, pad: bool = True) -> bytes:
    h = json.dumps(header).encode()
    if pad:
        h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


F32_2 = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}
BAD = {
    "header too long": (struct.pack("<Q", 2**40) + b"{}", "header length 1099511627776"),
    "bad json": (struct.pack("<Q", 3) + b"{x}", "not valid"),
    "not an object": (_st([1, 2], b""), "not an object"),
    "unknown dtype": (_st({"w": {"dtype": "F8", "shape": [1], "data_offsets": [0, 1]}}, bytes(1)),
                      "tensor 'w': unknown or missing dtype 'F8'"),
    "offsets outside": (_st({"w": {**F32_2, "data_offsets": [0, 80]}}, bytes(8)),
                        "data_offsets .* outside"),
    "size mismatch": (_st({"w": {**F32_2, "shape": [3]}}, bytes(8)), "8 bytes for shape"),
    "negative shape": (_st({"w": {**F32_2, "shape": [-2]}}, bytes(8)), "bad shape"),
    "overlap": (_st({"a": F32_2, "b": {**F32_2, "data_offsets": [4, 12]}}, bytes(12)), "overlap"),
    "metadata": (_st({"__metadata__": {"a": 1}}, b""), "__metadata__"),
    "too small": (b"\1\0", "too small"),
    "deep json": (struct.pack("<Q", 200_000) + b"[" * 200_000, "not valid"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_malformed_safetensors(tmp_path, case):
    data, pattern = BAD[case]
    p = tmp_path / "m.safetensors"
    p.write_bytes(data)
    with pytest.raises(GGUFError, match=pattern):
        SafetensorsFile(p)


def test_safetensors_values_match_the_library(tmp_path):
    "A file written by the safetensors library itself (numpy API)."
    from safetensors.numpy import save_file
    rng = np.random.default_rng(0)
    ts = {"a": rng.standard_normal((3, 5)).astype(np.float32),
          "b": rng.standard_normal(7).astype(np.float16), "c": np.arange(6, dtype=np.int32).reshape(2, 3)}
    save_file(ts, tmp_path / "x.safetensors", metadata={"format": "np"})
    with SafetensorsFile(tmp_path / "x.safetensors") as f:
        assert f.metadata == {"format": "np"}
        for k, v in ts.items():
            assert f.numpy(k).dtype == v.dtype and np.array_equal(f.numpy(k), v)


def test_hf_folder_errors(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    with pytest.raises(ModelError, match="model_type 'gpt2' is not supported"):
        open_model(tmp_path)
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ModelError, match="not valid JSON"):
        open_model(tmp_path)


@pytest.mark.parametrize("arch,tied,head_dim", [("qwen3", False, 32), ("qwen3", True, None),
                                                ("llama", True, None), ("llama", False, 32)])
def test_same_model_from_safetensors_and_gguf(tmp_path, arch, tied, head_dim):
    """One HF model, saved by HF (safetensors) and written as GGUF by the chapter-08 oracle writer
    (tests/hf_models.py, llama.cpp's convert rules): both files give the same interface: same
    tensor names, same float32 values, same config."""
    hf_models = pytest.importorskip("hf_models")
    make = hf_models.tiny_qwen3 if arch == "qwen3" else hf_models.tiny_llama
    model = make(tied=tied, head_dim=head_dim)
    model.save_pretrained(tmp_path / "hf")
    hf_models.write_gguf(model, tmp_path / "m.gguf", "F32")
    with open_model(tmp_path / "hf") as a, open_model(tmp_path / "m.gguf") as b:
        assert (a.format, b.format) == ("safetensors", "gguf")
        ca, cb = a.config.to_dict(), b.config.to_dict()
        assert ca.pop("rms_eps") == pytest.approx(cb.pop("rms_eps"), rel=1e-6)  # GGUF keeps a float32
        assert ca == cb
        assert sorted(a.tensor_names) == sorted(b.tensor_names)
        for name in a.tensor_names:
            assert np.array_equal(a.float32(name), b.float32(name)), name
