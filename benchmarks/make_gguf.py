#!/usr/bin/env python3
"""Random-weight GGUF files for the speed race (the real tensor shapes, the real Qwen2/Qwen3
vocabulary of 151936 tokens, so llama.cpp loads them too).

    python benchmarks/make_gguf.py qwen3-0.6b /tmp/models/qwen3-0.6b-q8_0.gguf
    python benchmarks/make_gguf.py qwen3-8b   /tmp/models/qwen3-8b-q4_k.gguf --type q4_k
    python benchmarks/make_gguf.py qwen3-30b-a3b /tmp/models/qwen3-30b-a3b-q8_0.gguf   # experts (qwen3moe)
    python benchmarks/make_gguf.py qwen2.5-7b /tmp/models/qwen2.5-7b.gguf   # qwen2: q/k/v biases
    python benchmarks/make_gguf.py mistral-7b /tmp/models/mistral-7b.gguf   # llama

Mistral-7B's file keeps this vocabulary (151936 rows of embeddings and head, not Mistral's 32768:
about 7 % more bytes a token, read alike by both engines).

Weights are random blocks written straight as bytes (random codes, float16 scales and minimums
sized for about 0.02 standard deviation like a trained model's), so an 8B file takes seconds, not
the minutes quantizing float32 would; every matrix in one type (Q8_0 by default; Q4_0, Q4_1,
Q5_0, Q5_1, Q4_K, Q5_K or Q6_K), no llama.cpp needed. Norm weights are ones. (The race's `_k_m`
files are llama.cpp's own mixes: `race_model qwen3-8b-q4_k_m` in benchmarks/llamacpp.sh.)
"""
import argparse
import pathlib

import gguf
import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
VOCAB = ROOT / "tests" / "data" / "ggml-vocab-qwen2.gguf"

# the published configs (config.json of Qwen/Qwen3-0.6B, Qwen/Qwen3-8B, Qwen/Qwen3-30B-A3B,
# Qwen/Qwen2.5-7B and mistralai/Mistral-7B-v0.3); arch "qwen3" unless named
MODELS = {
    "qwen3-0.6b": dict(n_layer=28, hidden=1024, n_head=16, n_kv=8, head_dim=128, ffn=3072, tied=True),
    "qwen3-8b": dict(n_layer=36, hidden=4096, n_head=32, n_kv=8, head_dim=128, ffn=12288, tied=False),
    # Qwen/Qwen3-30B-A3B: 128 experts of 768 in every layer, 8 per token (the `qwen3moe` architecture)
    "qwen3-30b-a3b": dict(n_layer=48, hidden=2048, n_head=32, n_kv=4, head_dim=128, ffn=6144, tied=False,
                          experts=128, experts_used=8, expert_ffn=768),
    "qwen2.5-7b": dict(arch="qwen2", n_layer=28, hidden=3584, n_head=28, n_kv=4, head_dim=128, ffn=18944, tied=False,
                       ctx=32768),
    "mistral-7b": dict(arch="llama", n_layer=32, hidden=4096, n_head=32, n_kv=8, head_dim=128, ffn=14336, tied=False,
                       eps=1e-5, ctx=32768),
}
N_VOCAB, THETA, EPS, CTX = 151936, 1e6, 1e-6, 40960


# the float16 fields of a block: (byte offset, value per unit of d) — the scale d itself, and a
# minimum that centres the codes on zero (Q4_1/Q5_1: m = -mean code; K-quants: dmin = mean code)
F16_FIELDS = {"Q8_0": [(0, 1)], "Q4_0": [(0, 1)], "Q4_1": [(0, 1), (2, -7.5)], "Q5_0": [(0, 1)],
              "Q5_1": [(0, 1), (2, -15.5)], "Q4_K": [(0, 1), (2, 7.5)], "Q5_K": [(0, 1), (2, 15.5)],
              "Q6_K": [(208, 1)]}
FILE_TYPES = {"Q8_0": gguf.LlamaFileType.MOSTLY_Q8_0, "Q4_0": gguf.LlamaFileType.MOSTLY_Q4_0,
              "Q4_1": gguf.LlamaFileType.MOSTLY_Q4_1, "Q5_0": gguf.LlamaFileType.MOSTLY_Q5_0,
              "Q5_1": gguf.LlamaFileType.MOSTLY_Q5_1, "Q4_K": gguf.LlamaFileType.MOSTLY_Q4_K_S,
              "Q5_K": gguf.LlamaFileType.MOSTLY_Q5_K_S, "Q6_K": gguf.LlamaFileType.MOSTLY_Q6_K}


def random_blocks(qtype: str, rows: int, cols: int, rng: np.random.Generator, std: float = 0.02) -> np.ndarray:
    "Raw `qtype` rows [rows, cols/block*bytes]: random codes, scales sized for about `std`."
    block, size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[qtype]]
    blocks = np.frombuffer(rng.bytes(rows * cols // block * size), np.uint8).reshape(-1, size).copy()

    def scale(d):
        for at, per in F16_FIELDS[qtype]:
            blocks[:, at:at + 2] = np.frombuffer(np.float16(d * per).tobytes(), np.uint8)

    scale(1.0)                                       # measure what d = 1 gives, then size d
    scale(std / float(gguf.quants.dequantize(blocks[:4096], gguf.GGMLQuantizationType[qtype]).std()))
    return blocks.reshape(rows, cols // block * size)


def vocab_fields():
    "(key, value, type, sub_type) of every tokenizer field of the real Qwen2 vocabulary."
    r = gguf.GGUFReader(str(VOCAB))
    for name, f in r.fields.items():
        if name.startswith("tokenizer."):
            sub = f.types[-1] if f.types[0] == gguf.GGUFValueType.ARRAY else None
            yield name, f.contents(), f.types[0], sub


def write(name: str, path: pathlib.Path, seed: int = 0, n_layer: int | None = None, qtype: str = "Q8_0") -> pathlib.Path:
    "The file of model `name`, matrices in `qtype`; `n_layer` cuts it to its first blocks (for per-layer profiles)."
    c = dict(MODELS[name], **({"n_layer": n_layer} if n_layer else {}))
    rng = np.random.default_rng(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    E = c.get("experts", 0)
    arch = "qwen3moe" if E else c.get("arch", "qwen3")
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name(f"random {name}")
    w.add_file_type(FILE_TYPES[qtype])
    w.add_block_count(c["n_layer"])
    w.add_context_length(c.get("ctx", CTX))
    w.add_embedding_length(c["hidden"])
    w.add_feed_forward_length(c["ffn"])
    w.add_head_count(c["n_head"])
    w.add_head_count_kv(c["n_kv"])
    w.add_key_length(c["head_dim"])
    w.add_value_length(c["head_dim"])
    w.add_rope_freq_base(THETA)
    w.add_rope_dimension_count(c["head_dim"])
    w.add_layer_norm_rms_eps(c.get("eps", EPS))
    if E:
        w.add_expert_count(E)
        w.add_expert_used_count(c["experts_used"])
        w.add_expert_feed_forward_length(c["expert_ffn"])
    for key, value, vtype, sub in vocab_fields():
        w.add_key_value(key, value, vtype, sub_type=sub)
    D, q, kv, F = c["hidden"], c["n_head"] * c["head_dim"], c["n_kv"] * c["head_dim"], c["ffn"]
    raw = gguf.GGMLQuantizationType[qtype]
    ones = lambda n: np.ones(n, np.float32)          # noqa: E731
    w.add_tensor("token_embd.weight", random_blocks(qtype, N_VOCAB, D, rng), raw_dtype=raw)
    for il in range(c["n_layer"]):
        p = f"blk.{il}."
        ffn = () if E else (("ffn_gate", (F, D)), ("ffn_up", (F, D)), ("ffn_down", (D, F)))
        for t, (rows, cols) in (("attn_q", (q, D)), ("attn_k", (kv, D)), ("attn_v", (kv, D)),
                                ("attn_output", (D, q))) + ffn:
            w.add_tensor(p + t + ".weight", random_blocks(qtype, rows, cols, rng), raw_dtype=raw)
        if E:       # the router stays float32 (llama-quantize leaves it); the experts stacked [E, rows, ...]
            Fe = c["expert_ffn"]
            w.add_tensor(p + "ffn_gate_inp.weight", (0.02 * rng.standard_normal((E, D))).astype(np.float32))
            for t, (rows, cols) in (("ffn_gate_exps", (Fe, D)), ("ffn_up_exps", (Fe, D)), ("ffn_down_exps", (D, Fe))):
                blocks = random_blocks(qtype, E * rows, cols, rng).reshape(E, rows, -1)
                w.add_tensor(p + t + ".weight", blocks, raw_dtype=raw)
        if arch == "qwen2":          # q, k and v biases, float32 as the converter writes them
            for t, n in (("attn_q", q), ("attn_k", kv), ("attn_v", kv)):
                w.add_tensor(p + t + ".bias", (0.02 * rng.standard_normal(n)).astype(np.float32))
        qk_norms = (("attn_q_norm", c["head_dim"]), ("attn_k_norm", c["head_dim"])) if arch.startswith("qwen3") else ()
        for t, n in (("attn_norm", D), ("ffn_norm", D)) + qk_norms:
            w.add_tensor(p + t + ".weight", ones(n))
    w.add_tensor("output_norm.weight", ones(D))
    if not c["tied"]:
        w.add_tensor("output.weight", random_blocks(qtype, N_VOCAB, D, rng), raw_dtype=raw)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", choices=sorted(MODELS))
    ap.add_argument("path", type=pathlib.Path)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--layers", type=int, help="only the first N blocks (default: all)")
    ap.add_argument("--type", default="q8_0", type=str.upper, choices=sorted(F16_FIELDS),
                    help="the type of every matrix (default q8_0)")
    a = ap.parse_args()
    out = write(a.model, a.path, a.seed, a.layers, a.type)
    print(f"wrote {out} ({out.stat().st_size / 2**30:.2f} GiB)")
