"""Chapter 03d exercises: sniffing a format (reference: files written by gguf-py and the
safetensors package) and HF -> GGUF tensor names (reference: gguf-py's own TensorNameMap, the
table llama.cpp's converter uses)."""
import gguf
import numpy as np
import pytest
from safetensors.numpy import save_file


def test_ch03d_1_sniff_format(impl, tmp_path):
    w = gguf.GGUFWriter(str(tmp_path / "m.gguf"), "llama")
    w.add_tensor("w", np.zeros(32, np.float32))
    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
    save_file({"w": np.zeros(4, np.float32)}, str(tmp_path / "m.safetensors"))
    assert impl.sniff_format((tmp_path / "m.gguf").read_bytes()[:16]) == "gguf"
    assert impl.sniff_format((tmp_path / "m.safetensors").read_bytes()[:16]) == "safetensors"
    for other in [b"PK\x03\x04" + bytes(12), b"\x89PNG\r\n\x1a\n" + bytes(8), b'{"a": 1}' + bytes(8),
                  (10**12).to_bytes(8, "little") + b"{" + bytes(7)]:
        assert impl.sniff_format(other) is None, other


@pytest.mark.parametrize("arch", [gguf.MODEL_ARCH.QWEN3, gguf.MODEL_ARCH.LLAMA])
def test_ch03d_2_gguf_name(impl, arch):
    ref = gguf.get_tensor_name_map(arch, 4)
    names = ["model.embed_tokens", "lm_head", "model.norm"] + [
        f"model.layers.{i}.{p}" for i in range(4) for p in
        ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
         "mlp.up_proj", "mlp.down_proj", "input_layernorm", "post_attention_layernorm"]
        + (["self_attn.q_norm", "self_attn.k_norm"] if arch == gguf.MODEL_ARCH.QWEN3 else [])]
    for n in names:
        assert impl.gguf_name(n) == ref.get_name(n), n
    assert impl.gguf_name("model.layers.0.self_attn.rotary_emb.inv_freq") is None


WRONG = {"test_ch03d_1_sniff_format": {"any-brace": {"sniff_format": lambda head: "gguf" if bytes(head)[:4] == b"GGUF"
                                                     else "safetensors" if b"{" in bytes(head) else None}},
         "test_ch03d_2_gguf_name": {"norms-swapped": {"gguf_name": lambda n: (
             __import__("solutions.ch03d", fromlist=["x"]).gguf_name(n) or "").replace("attn_norm", "FFN").replace(
             "ffn_norm", "attn_norm").replace("FFN", "ffn_norm") or None}}}
