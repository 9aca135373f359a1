"""Chapter 03d (the model file: detector and adapters): your answers.

Write each function, then check it: python -m tffedu.exercises ch03d
(the reference answers are in solutions/ch03d.py: look once you have tried)
"""
import json
import re
import struct
__all__ = ['sniff_format', 'gguf_name']

# HF names of a Qwen3 / Llama block's weights (after model.layers.N.) -> GGUF names (after blk.N.)
BLOCK_NAMES = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
               "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm",
               "self_attn.k_norm": "attn_k_norm", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
               "mlp.down_proj": "ffn_down", "input_layernorm": "attn_norm",
               "post_attention_layernorm": "ffn_norm"}


def sniff_format(head):
    """Exercise 03d.1 (easy): a model file's format from its first bytes (at least 9): "gguf" when
    they start with b"GGUF"; "safetensors" when the first 8 bytes are a little-endian header length
    (at most 100 MB) followed by "{"; otherwise None."""
    raise NotImplementedError("ch03d: sniff_format is yours to write")


def gguf_name(hf_name):
    """Exercise 03d.2 (medium): the GGUF name of a Qwen3/Llama tensor from its Hugging Face name,
    without the ".weight"/".bias" suffix: model.embed_tokens -> token_embd, lm_head -> output,
    model.norm -> output_norm, model.layers.N.<part> -> blk.N.<BLOCK_NAMES[part]>; None if unknown."""
    raise NotImplementedError("ch03d: gguf_name is yours to write")
