"""Test oracles: tiny random HF transformers models, written as GGUF the way llama.cpp does.

`tiny_qwen3(...)` / `tiny_llama(...)` build a seeded random `Qwen3ForCausalLM` / `LlamaForCausalLM`
(torch float32, eval mode; `attention_bias=True` gives q, k, v and o biases, random, not HF's zeros). `write_gguf(model, path, wtype)` writes it with gguf-py's GGUFWriter,
following llama.cpp's convert_hf_to_gguf.py: tensor names `blk.N.attn_q.weight` ..., the Q/K row
permutation for llama (so the engine must use the adjacent-pairs RoPE; q/k biases permuted too),
1-D norms and biases kept in F32,
2-D weights stored as F32/F16/BF16/Q8_0/Q4_0/... (`tffedu.quant.quantize`, the ggml reference
rounding; random blocks for the types it does not write: `random_blocks_like`) or as a llama.cpp
file type that mixes them (`Q4_K_M`: `FILE_RECIPES`). For a lossy type
the HF model's weights are replaced by the dequantized values (gguf-py's own `dequantize`) so HF
and the GGUF describe the *same* function: tests then compare our logits against HF's.

The vocabulary is a truncated copy of the real Qwen2/Qwen3 byte-level BPE (first `n_regular`
tokens, the merges that stay inside them, and the three chat special tokens), so the tokenizer
section is genuine but the embedding stays tiny.

We deliberately do not re-read the GGUF with HF (HF's GGUF import ignores
`qwen3.attention.key_length`); the reference is the HF model we wrote.
"""
from __future__ import annotations

import functools
import pathlib

import numpy as np
import torch
import gguf
from gguf import GGMLQuantizationType as QT

import tffedu.model
from tffedu.quant import quantize
from gguf_util import add_metadata
from tffedu.sampling import picker

DATA = pathlib.Path(__file__).resolve().parent / "data"  # the real vocabularies (tests/data/README.md)
QWEN2_VOCAB = DATA / "ggml-vocab-qwen2.gguf"
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + "
                 "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
                 "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
# llama_ftype values (general.file_type) of the file types written here
FILE_TYPE = {"F32": 0, "F16": 1, "Q4_0": 2, "Q4_1": 3, "Q8_0": 7, "Q5_0": 8, "Q5_1": 9, "Q2_K": 10,
             "Q3_K_M": 12, "Q4_K_M": 15, "Q5_K_M": 17, "Q6_K": 18, "IQ2_XXS": 19, "IQ2_XS": 20,
             "IQ3_XXS": 23, "IQ1_S": 24, "IQ4_NL": 25, "IQ3_S": 26, "IQ2_S": 28, "IQ4_XS": 30, "BF16": 32,
             "TQ1_0": 36, "TQ2_0": 37}
# a K-quant file type: (base type, the type of attn_v / ffn_down in the layers that get more bits
# and of output.weight) — llama.cpp's llama_tensor_get_type for these types
FILE_RECIPES = {"Q4_K_M": ("Q4_K", "Q6_K"), "Q5_K_M": ("Q5_K", "Q6_K"), "Q6_K": ("Q6_K", "Q6_K"),
                "Q3_K_M": ("Q3_K", "Q5_K"), "Q2_K": ("Q2_K", "Q3_K"), "IQ4_XS": ("IQ4_XS", "Q5_K")}
K_FALLBACK = {"Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0",   # rows not a multiple of 256
              "Q2_K": "Q4_0", "Q3_K": "Q4_0", "IQ4_XS": "IQ4_NL"}
# where the float16 scale(s) sit in a block of the types written as random blocks (ggml-common.h)
SCALE_FIELDS = {"Q2_K": (80, 82), "Q3_K": (108,), "IQ4_NL": (0,), "IQ4_XS": (0,), "IQ2_XXS": (0,),
                "IQ2_XS": (0,), "IQ2_S": (0,), "IQ3_XXS": (0,), "IQ3_S": (0,), "IQ1_S": (0,),
                "TQ1_0": (52,), "TQ2_0": (64,)}


def _use_more_bits(i: int, n: int) -> bool:
    "llama.cpp's use_more_bits: the first and last eighth of the layers and every third between."
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def tensor_type(wtype: str, gname: str, n_layer: int, row: int) -> str:
    "The type a 2-D tensor gets in a file of type `wtype` (a plain type, or a FILE_RECIPES key)."
    if wtype not in FILE_RECIPES:
        return wtype
    base, more = FILE_RECIPES[wtype]
    t = base
    if gname == "output.weight":
        t = more
    elif gname.endswith((".attn_v.weight", ".ffn_down.weight")) and _use_more_bits(int(gname.split(".")[1]), n_layer):
        t = more
    return K_FALLBACK[t] if row % 256 and t in K_FALLBACK else t


# --------------------------------------------------------------------------------------- vocab
@functools.cache
def small_vocab(n_regular: int = 500):
    "(tokens, token_types, merges) of the first `n_regular` Qwen2 tokens plus 3 specials."
    # (gguf-py's reader needs ~30 s for this 151k-token file; tffedu's mmap reader < 1 s. The
    # vocabulary is only input data here: what the tests check is the model built on it.)
    from tffedu.gguf import GGUFFile
    with GGUFFile(QWEN2_VOCAB) as f:
        all_tokens, all_merges = f.metadata["tokenizer.ggml.tokens"], f.metadata["tokenizer.ggml.merges"]
    tokens = list(all_tokens[:n_regular])
    keep = set(tokens)
    merges = []
    # Qwen2's token 256+i is the result of merge i: the first n_regular-256 merges stay inside.
    for m in all_merges[:n_regular - 256]:
        a, b = m.split(" ")
        assert a in keep and b in keep and a + b in keep, m
        merges.append(m)
    types = [1] * n_regular + [3] * len(SPECIALS)   # 1 normal, 3 control
    return tokens + SPECIALS, types, merges


def vocab_size(n_regular: int = 500) -> int:
    return n_regular + len(SPECIALS)


# --------------------------------------------------------------------------------------- models
def _init_(model: torch.nn.Module, seed: int, std: float) -> None:
    """Seeded random weights; norms around 1 (not exactly 1, so a missed norm weight shows), biases
    around 0 but not 0 (HF starts them at 0, which would hide a missed bias)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(".bias"):
                p.copy_(0.2 * torch.randn(p.shape, generator=g))
            elif p.ndim == 1:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(std * torch.randn(p.shape, generator=g))


def _tiny(arch, hidden, layers, heads, kv_heads, head_dim, ffn, tied, n_regular, ctx, theta, eps,
          seed, std, rope_scaling, attention_bias=False, rope_parameters=None, **more):
    """A random HF causal LM of `arch` ('qwen3', 'llama', 'qwen2' or 'mistral') in float32, eval mode.
    rope_parameters: the config's own (Gemma 3's, one per layer type), else one from theta."""
    import transformers
    Config, Model = {"qwen3": (transformers.Qwen3Config, transformers.Qwen3ForCausalLM),
                     "llama": (transformers.LlamaConfig, transformers.LlamaForCausalLM),
                     "qwen2": (transformers.Qwen2Config, transformers.Qwen2ForCausalLM),
                     "mistral": (transformers.MistralConfig, transformers.MistralForCausalLM),
                     "gemma3_text": (transformers.Gemma3TextConfig, transformers.Gemma3ForCausalLM),
                     "qwen3_moe": (transformers.Qwen3MoeConfig, transformers.Qwen3MoeForCausalLM)}[arch]
    vs = vocab_size(n_regular)
    # Qwen2's config has neither: head_dim is hidden // heads, and q, k, v always have biases
    extra = {} if arch == "qwen2" else dict(head_dim=head_dim or hidden // heads, attention_bias=attention_bias)
    assert arch != "qwen2" or (head_dim in (None, hidden // heads) and not attention_bias)
    cfg = Config(vocab_size=vs, hidden_size=hidden, intermediate_size=ffn,
                 num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
                 max_position_embeddings=ctx, rms_norm_eps=eps, tie_word_embeddings=tied,
                 rope_parameters=rope_parameters or {"rope_type": "default", "rope_theta": theta, **(rope_scaling or {})},
                 bos_token_id=vs - 3, eos_token_id=vs - 1, pad_token_id=vs - 3, **extra, **more)
    torch.manual_seed(seed)
    model = Model(cfg).float().eval()
    _init_(model, seed, std)
    if tied:
        model.tie_weights()
    return model


def tiny_qwen3(hidden=64, layers=2, heads=4, kv_heads=2, head_dim=None, ffn=96, tied=False,
               n_regular=500, ctx=256, theta=10000.0, eps=1e-6, seed=0, std=0.05, rope_scaling=None,
               attention_bias=False):
    "A random Qwen3ForCausalLM in float32 (eval). head_dim defaults to hidden // heads."
    return _tiny("qwen3", hidden, layers, heads, kv_heads, head_dim, ffn, tied, n_regular, ctx,
                 theta, eps, seed, std, rope_scaling, attention_bias)


def tiny_qwen2(hidden=64, layers=2, heads=4, kv_heads=2, ffn=96, tied=False, n_regular=500, ctx=256,
               theta=1e6, eps=1e-6, seed=0, std=0.05, rope_scaling=None):
    "A random Qwen2ForCausalLM in float32 (eval): biases on q, k and v, no q/k norms."
    return _tiny("qwen2", hidden, layers, heads, kv_heads, None, ffn, tied, n_regular, ctx,
                 theta, eps, seed, std, rope_scaling)


def tiny_mistral(hidden=64, layers=2, heads=4, kv_heads=2, head_dim=None, ffn=96, tied=False,
                 n_regular=500, ctx=256, theta=10000.0, eps=1e-5, seed=0, std=0.05, window=4):
    """A random MistralForCausalLM in float32 (eval): Llama's layers, attention over a sliding window
    of `window` keys (None: the whole context)."""
    return _tiny("mistral", hidden, layers, heads, kv_heads, head_dim, ffn, tied, n_regular, ctx,
                 theta, eps, seed, std, None, sliding_window=window)


def tiny_gemma3(hidden=64, layers=7, heads=4, kv_heads=2, head_dim=32, ffn=96, tied=True,
                n_regular=500, ctx=256, theta=1e6, local_theta=1e4, eps=1e-6, seed=0, std=0.05, window=4,
                layer_types=None, query_pre_attn_scalar=None, rope_scaling=None):
    """A random Gemma3ForCausalLM (text) in float32 (eval): a window of `window` keys on five layers
    of six (or `layer_types`), RoPE theta `local_theta` there and `theta` (with `rope_scaling`) on
    the others, norms after each sub-block, GeGLU, embeddings scaled by sqrt(hidden)."""
    types = layer_types or ["full_attention" if i % 6 == 5 else "sliding_attention" for i in range(layers)]
    rope = {"full_attention": {"rope_type": "default", "rope_theta": theta, **(rope_scaling or {})},
            "sliding_attention": {"rope_type": "default", "rope_theta": local_theta}}
    return _tiny("gemma3_text", hidden, layers, heads, kv_heads, head_dim, ffn, tied, n_regular, ctx,
                 theta, eps, seed, std, None, rope_parameters=rope, sliding_window=window, layer_types=types,
                 query_pre_attn_scalar=query_pre_attn_scalar or head_dim)


def tiny_qwen3moe(hidden=64, layers=2, heads=4, kv_heads=2, head_dim=16, experts=8, top_k=2, expert_ffn=32,
                  norm_topk_prob=True, tied=False, n_regular=500, ctx=256, theta=1e6, eps=1e-6, seed=0, std=0.05):
    """A random Qwen3MoeForCausalLM in float32 (eval): `experts` SwiGLU experts of `expert_ffn` per
    layer, `top_k` of them per token, their probabilities renormalised when `norm_topk_prob`."""
    return _tiny("qwen3_moe", hidden, layers, heads, kv_heads, head_dim, 96, tied, n_regular, ctx, theta, eps,
                 seed, std, None, num_experts=experts, num_experts_per_tok=top_k,
                 moe_intermediate_size=expert_ffn, norm_topk_prob=norm_topk_prob)


def tiny_llama(hidden=64, layers=2, heads=4, kv_heads=2, head_dim=None, ffn=96, tied=True,
               n_regular=500, ctx=256, theta=10000.0, eps=1e-5, seed=0, std=0.05, rope_scaling=None,
               attention_bias=False):
    "A random LlamaForCausalLM in float32 (eval), SmolLM2-like (tied by default)."
    return _tiny("llama", hidden, layers, heads, kv_heads, head_dim, ffn, tied, n_regular, ctx,
                 theta, eps, seed, std, rope_scaling, attention_bias)


# --------------------------------------------------------------------------------------- writer
def llama_permute(w: np.ndarray, n_head: int, n_head_kv: int | None) -> np.ndarray:
    "llama.cpp convert_hf_to_gguf.py LlamaModel.permute: HF's rotate-half rows -> adjacent pairs."
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def llama_unpermute(w: np.ndarray, n_head: int, n_head_kv: int | None) -> np.ndarray:
    "The inverse of `llama_permute`: adjacent pairs -> HF's rotate-half rows."
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return (w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


GEMMA3_NORMS = {"post_attention_layernorm": "post_attention_norm", "pre_feedforward_layernorm": "ffn_norm",
                "post_feedforward_layernorm": "post_ffw_norm"}   # gguf-py's names for Gemma 3's four norms


def _gguf_name(hf: str, arch: str = "llama") -> str | None:
    "HF parameter name -> GGUF tensor name (llama.cpp's tensor map for llama/qwen3, and gemma3's norms)."
    fixed = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
             "lm_head.weight": "output.weight"}
    if hf in fixed:
        return fixed[hf]
    parts = hf.split(".")          # model.layers.N.<module>.<sub>.weight (or .bias)
    n, rest, kind = parts[2], ".".join(parts[3:-1]), parts[-1]
    table = {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
             "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
             "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
             "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm",
             "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down",
             "mlp.gate": "ffn_gate_inp"}                     # Qwen3-MoE's router
    if arch == "gemma3":
        table.update(GEMMA3_NORMS)
    return f"blk.{n}.{table[rest]}.{kind}"


def gguf_arch(cfg) -> str:
    "llama.cpp's architecture name of an HF config."
    arch = cfg.model_type                     # "qwen3", "llama", "qwen2", "mistral", "gemma3_text", "qwen3_moe"
    assert arch in ("qwen3", "llama", "qwen2", "mistral", "gemma3_text", "qwen3_moe"), arch
    return {"mistral": "llama", "gemma3_text": "gemma3", "qwen3_moe": "qwen3moe"}.get(arch, arch)


def write_gguf(model, path, wtype: str = "F32", n_regular: int = 500, tokenizer: bool = True,
               ctx: int | None = None, vocab: dict | None = None, extra: dict | None = None) -> pathlib.Path:
    """Write `model` as GGUF at `path`, 2-D weights in `wtype`; the HF model is updated in place to
    the dequantized weights, so it stays the exact reference of the file. `vocab`: tokenizer.ggml.*
    keys to write instead of the small byte-level BPE vocabulary (a SentencePiece one, say); `extra`:
    more metadata keys (gguf_util.add_metadata)."""
    cfg = model.config
    arch = gguf_arch(cfg)
    path = pathlib.Path(path)
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name(f"tiny-random-{arch}")
    w.add_file_type(FILE_TYPE[wtype])
    w.add_block_count(cfg.num_hidden_layers)
    w.add_context_length(ctx or cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_rope_freq_base(float(cfg.rope_parameters.get("full_attention", cfg.rope_parameters)["rope_theta"]))
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_vocab_size(cfg.vocab_size)
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads   # Qwen2: none
    if arch in ("qwen3", "gemma3", "qwen3moe") or head_dim != cfg.hidden_size // cfg.num_attention_heads:
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)
    if arch == "llama":
        w.add_rope_dimension_count(head_dim)
    if arch == "qwen3moe":                            # llama.cpp's qwen3moe keys
        w.add_expert_count(cfg.num_experts)
        w.add_expert_used_count(cfg.num_experts_per_tok)
        w.add_expert_feed_forward_length(cfg.moe_intermediate_size)
        w.add_bool("qwen3moe.expert_weights_norm", bool(cfg.norm_topk_prob))   # llama.cpp assumes true
    if getattr(cfg, "sliding_window", None) and cfg.model_type == "mistral":
        w.add_sliding_window(cfg.sliding_window)     # llama.cpp's {arch}.attention.sliding_window
    if arch == "gemma3":                             # as llama.cpp's converter writes Gemma 3
        w.add_sliding_window(cfg.sliding_window)
        w.add_rope_freq_base_swa(float(cfg.rope_parameters["sliding_attention"]["rope_theta"]))
        default = ["full_attention" if i % 6 == 5 else "sliding_attention" for i in range(cfg.num_hidden_layers)]
        if list(cfg.layer_types) != default:         # llama.cpp's default: every 6th layer sees all
            w.add_sliding_window_pattern([t == "sliding_attention" for t in cfg.layer_types])
    rope = cfg.rope_parameters.get("full_attention", cfg.rope_parameters)   # Gemma 3: the global layers'
    if rope.get("rope_type", "default") == "linear":
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(float(rope["factor"]))
    if rope.get("rope_type") == "llama3":             # llama.cpp writes the per-pair factors as a tensor
        w.add_tensor("rope_freqs.weight", llama_cpp_rope_freqs(cfg))
    if vocab is not None:
        assert len(vocab["tokenizer.ggml.tokens"]) == cfg.vocab_size
        add_metadata(w, vocab)
    elif tokenizer:
        tokens, types, merges = small_vocab(n_regular)
        assert len(tokens) == cfg.vocab_size
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre("qwen2")
        w.add_token_list(tokens)
        w.add_token_types(types)
        w.add_token_merges(merges)
        w.add_bos_token_id(cfg.bos_token_id)
        w.add_eos_token_id(cfg.eos_token_id)
        w.add_pad_token_id(cfg.pad_token_id)
        w.add_add_bos_token(False)
        w.add_chat_template(CHAT_TEMPLATE)
    if extra:
        add_metadata(w, extra)

    tied = cfg.tie_word_embeddings
    with torch.no_grad():
        for name, p in model.named_parameters():   # tied lm_head is not listed twice
            if tied and name == "lm_head.weight":
                continue
            data = p.detach().numpy().astype(np.float32)
            if ".mlp.experts." in name:             # Qwen3-MoE's experts, stacked: [E, 2F, D] gate+up, [E, D, F]
                n, F = name.split(".")[2], cfg.moe_intermediate_size
                parts = ([(f"blk.{n}.ffn_gate_exps.weight", np.s_[:, :F]), (f"blk.{n}.ffn_up_exps.weight", np.s_[:, F:])]
                         if name.endswith("gate_up_proj") else [(f"blk.{n}.ffn_down_exps.weight", np.s_[:])])
            else:
                gname = _gguf_name(name, arch)
                parts = [(gname, np.s_[:])]
            for gname, part in parts:
                q, raw = _gguf_tensor(p, data, part, gname, arch, wtype, cfg)
                w.add_tensor(gname, q, raw_dtype=raw)
        if tied:
            model.tie_weights()
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


# Llama 3.1's RoPE scaling with an original context of 64 tokens: in a 60-token test the pairs of a small
# head fall on every side of the blend (kept, slowed by `factor`, in between)
LLAMA3_ROPE = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 64}


def llama_cpp_rope_freqs(cfg) -> np.ndarray:
    """rope_freqs.weight, the per-pair divisors llama.cpp's converter writes for llama3 RoPE scaling:
    the plain frequencies over transformers' own llama3 ones (its rope init, not our formula)."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    scaled, _ = ROPE_INIT_FUNCTIONS["llama3"](cfg, "cpu")
    dim = 2 * len(scaled)
    plain = 1.0 / (cfg.rope_parameters["rope_theta"] ** (torch.arange(0, dim, 2).float() / dim))
    return (plain / scaled).numpy().astype(np.float32)


def _gguf_tensor(p, data, part, gname, arch, wtype, cfg):
    """(values, raw type) of data[part] as GGUF tensor `gname`; the HF parameter p takes the values a
    lossy type leaves (dequantized), so the HF model stays the exact reference of the file."""
    data = np.ascontiguousarray(data[part])
    if data.ndim == 1:                      # norms and biases stay F32, like llama.cpp
        q, raw = data, None
        if arch == "gemma3" and gname.endswith("norm.weight"):
            q = data + np.float32(1.0)      # Gemma's norms compute with 1 + w: the converter adds the 1
    else:
        t = tensor_type(wtype, gname, cfg.num_hidden_layers, data.shape[-1])
        if t in ("F32", "F16"):
            q, raw = data.astype(np.float32 if t == "F32" else np.float16), None
        elif t in SCALE_FIELDS:
            q, raw = random_blocks_like(data, t, seed=len(gname)), QT[t]
        else:
            q, raw = quantize(data, t), QT[t]
        p[part].copy_(torch.from_numpy(gguf.quants.dequantize(q, QT[t]).reshape(data.shape).copy()))
    if arch == "llama" and ".attn_q." in gname:     # weight rows and bias values alike
        q = llama_permute(q, cfg.num_attention_heads, cfg.num_attention_heads)
    elif arch == "llama" and ".attn_k." in gname:
        q = llama_permute(q, cfg.num_attention_heads, cfg.num_key_value_heads)
    return q, raw


def random_blocks_like(data: np.ndarray, t: str, seed: int) -> np.ndarray:
    """Blocks of type `t` for the weights `data` where tffedu has no quantizer (Q2_K, Q3_K, the IQ
    and TQ formats): random codes under one float16 scale chosen so the values spread as `data`
    does. The HF model then takes their values, so it stays the file's exact reference."""
    block_size, type_size = gguf.GGML_QUANT_SIZES[QT[t]]
    rows, K = data.shape
    blocks = np.random.default_rng(seed).integers(0, 256, (rows * K // block_size, type_size), dtype=np.uint8)

    def with_scale(d: float) -> np.ndarray:
        for at in SCALE_FIELDS[t]:
            blocks[:, at:at + 2] = np.frombuffer(np.float16(d).tobytes(), np.uint8)
        return blocks.reshape(rows, -1).copy()

    spread = gguf.quants.dequantize(with_scale(1.0), QT[t]).std()     # values are linear in the scale
    return with_scale(float(data.std()) / float(spread))


def read_gguf_weights(model, path) -> dict[str, str]:
    """The inverse of `write_gguf` for another tool's file of the same model (llama.cpp's
    llama-quantize, say): every HF weight becomes the file's tensor as gguf-py dequantizes it (Llama's
    q/k rows permuted back), so HF stays the exact reference of the file. Returns {gguf name: type}."""
    cfg, arch = model.config, gguf_arch(model.config)
    assert arch in ("qwen3", "llama", "qwen2"), arch
    tensors = {t.name: t for t in gguf.GGUFReader(str(path)).tensors}
    types = {}
    with torch.no_grad():
        for name, p in model.named_parameters():
            if cfg.tie_word_embeddings and name == "lm_head.weight":
                continue
            gname = _gguf_name(name, arch)
            t = tensors[gname]
            w = gguf.quants.dequantize(t.data, t.tensor_type).reshape(p.shape)
            if arch == "llama" and ".attn_q." in gname:
                w = llama_unpermute(w, cfg.num_attention_heads, cfg.num_attention_heads)
            elif arch == "llama" and ".attn_k." in gname:
                w = llama_unpermute(w, cfg.num_attention_heads, cfg.num_key_value_heads)
            p.copy_(torch.from_numpy(np.array(w, np.float32)))       # a copy: gguf-py maps the file
            types[gname] = t.tensor_type.name
        if cfg.tie_word_embeddings:
            model.tie_weights()
    return types


def save_bf16(model, folder, max_shard_size: str = "40KB") -> None:
    """Save `model` as a BF16 HF folder in shards with an index file (a release's layout); the model
    keeps its float32 computation on the BF16-rounded weights, so it stays the reference of the folder."""
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.to(torch.bfloat16).float())
    model.to(torch.bfloat16).save_pretrained(folder, max_shard_size=max_shard_size)
    model.float()
    model.model.rotary_emb = type(model.model.rotary_emb)(model.config)   # .to() rounded its frequencies too


# --------------------------------------------------------------------------------------- oracles
def hf_logits(model, ids) -> np.ndarray:
    "float32 [len(ids), vocab] logits of HF's forward pass."
    with torch.no_grad():
        return model(torch.tensor([list(ids)])).logits[0].float().numpy()


def top1_gaps(ref: np.ndarray, tokens) -> np.ndarray:
    """Per row of logits `ref`, how far the logit of the token chosen there sits below the row's best,
    over the row's largest |logit|: 0 where it is the top-1, small at a near-tie."""
    ref, tokens = np.asarray(ref), np.asarray(tokens)
    return (ref.max(-1) - ref[np.arange(len(tokens)), tokens]) / np.abs(ref).max(-1)


def hf_greedy_gaps(model, prompt, tokens) -> np.ndarray:
    "`top1_gaps` of a continuation `tokens` of `prompt` along HF's own logits (teacher-forced)."
    return top1_gaps(hf_logits(model, list(prompt) + list(tokens))[len(prompt) - 1:-1], tokens)


def hf_greedy(model, ids, n: int) -> list[int]:
    "HF's greedy continuation (n new tokens, no early stop)."
    with torch.no_grad():
        out = model.generate(torch.tensor([list(ids)]), max_new_tokens=n, do_sample=False,
                             min_new_tokens=n, pad_token_id=model.config.pad_token_id)
    return out[0, len(ids):].tolist()


def rel_err(a, b) -> float:
    "max |a - b| relative to max |b| (the tolerance the issue states)."
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.abs(a - b).max() / np.abs(b).max())



class SamplingLoop(tffedu.model.ContiguousModel):
    """Chapter 08b's one-sequence loop called like the engine's `generate`, its sampling arguments
    turned into chapter 14's `picker`: the oracle the engine is compared with."""

    def generate(self, prompt, max_new_tokens: int = 64, temperature: float = 0.0, top_k: int = 0,
                 top_p: float = 1.0, min_p: float = 0.0, seed=None, **kw):
        pick = picker(temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p, seed=seed)
        return super().generate(prompt, max_new_tokens, pick=pick, **kw)


# ------------------------------------------------------------------------- 8-bit K/V (chapter 09)
def _q8_rows(t: torch.Tensor, pairs: bool) -> torch.Tensor:
    """t [..., D] rounded through gguf-py's Q8_0 (blocks of 32 along D). pairs: a llama-family GGUF
    holds each K head's row in adjacent-pair order (`llama_permute`), so its blocks group those."""
    a = t.detach().float().numpy()
    D = a.shape[-1]
    if pairs:                                            # rotate-half order -> adjacent pairs
        a = a.reshape(*a.shape[:-1], 2, D // 2).swapaxes(-1, -2)
    r = gguf.quants.dequantize(gguf.quants.quantize(np.ascontiguousarray(a).reshape(-1, D), QT.Q8_0), QT.Q8_0)
    r = r.reshape(a.shape)
    if pairs:
        r = r.swapaxes(-1, -2)
    return torch.from_numpy(np.ascontiguousarray(r).reshape(t.shape)).to(t.dtype)


def hf_q8_kv(model):
    """A context in which `model` (HF) attends over K and V rounded through gguf-py's Q8_0, 32 values
    of each head's row to a block, as an 8-bit K/V cache holds them (keys after RoPE and the q/k
    norm, in the GGUF's order of a row)."""
    import contextlib
    from transformers import AttentionInterface
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
    pairs = gguf_arch(model.config) == "llama"          # write_gguf permutes llama's (and mistral's) q/k rows

    def attention(module, query, key, value, attention_mask, **kw):
        return sdpa_attention_forward(module, query, _q8_rows(key, pairs), _q8_rows(value, False),
                                      attention_mask, **kw)

    AttentionInterface.register("q8_kv", attention)
    AttentionMaskInterface.register("q8_kv", sdpa_mask)     # SDPA's masks (causal, sliding windows)

    @contextlib.contextmanager
    def ctx():
        old = model.config._attn_implementation
        model.set_attn_implementation("q8_kv")
        try:
            yield model
        finally:
            model.set_attn_implementation(old)
    return ctx()
