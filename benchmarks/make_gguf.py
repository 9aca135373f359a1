#!/usr/bin/env python3
"""Random-weight Qwen3-shaped Q8_0 GGUF files for the speed race (the real tensor shapes, the real
Qwen2/Qwen3 vocabulary of 151936 tokens, so llama.cpp loads them too).

    python benchmarks/make_gguf.py qwen3-0.6b /tmp/models/qwen3-0.6b-q8_0.gguf
    python benchmarks/make_gguf.py qwen3-8b   /tmp/models/qwen3-8b-q8_0.gguf

Weights are random Q8_0 blocks written straight as bytes (an f16 scale and 32 random int8 per
block, about 0.02 standard deviation like a trained model's), so the 8.7 GB file takes seconds,
not the minutes quantizing float32 would. Norm weights are ones.
"""
import argparse
import pathlib

import gguf
import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
VOCAB = ROOT / "tests" / "data" / "ggml-vocab-qwen2.gguf"

# the published configs (config.json of Qwen/Qwen3-0.6B and Qwen/Qwen3-8B)
MODELS = {
    "qwen3-0.6b": dict(n_layer=28, hidden=1024, n_head=16, n_kv=8, head_dim=128, ffn=3072, tied=True),
    "qwen3-8b": dict(n_layer=36, hidden=4096, n_head=32, n_kv=8, head_dim=128, ffn=12288, tied=False),
}
N_VOCAB, THETA, EPS, CTX = 151936, 1e6, 1e-6, 40960


def random_q8_0(rows: int, cols: int, rng: np.random.Generator, std: float = 0.02) -> np.ndarray:
    "Raw Q8_0 blocks [rows, cols/32*34]: one f16 scale and 32 random int8 per block."
    nb = rows * (cols // 32)
    blocks = np.empty((nb, 34), np.uint8)
    blocks[:, 2:] = np.frombuffer(rng.bytes(nb * 32), np.uint8).reshape(nb, 32)
    d = np.float16(std / 73.9)                       # uniform int8 has standard deviation ~73.9
    blocks[:, :2] = np.frombuffer(d.tobytes(), np.uint8)
    return blocks.reshape(rows, cols // 32 * 34)


def vocab_fields():
    "(key, value, type, sub_type) of every tokenizer field of the real Qwen2 vocabulary."
    r = gguf.GGUFReader(str(VOCAB))
    for name, f in r.fields.items():
        if name.startswith("tokenizer."):
            sub = f.types[-1] if f.types[0] == gguf.GGUFValueType.ARRAY else None
            yield name, f.contents(), f.types[0], sub


def write(name: str, path: pathlib.Path, seed: int = 0, n_layer: int | None = None) -> pathlib.Path:
    "The file of model `name`; `n_layer` cuts it to its first blocks (for per-layer profiles)."
    c = dict(MODELS[name], **({"n_layer": n_layer} if n_layer else {}))
    rng = np.random.default_rng(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    w = gguf.GGUFWriter(str(path), "qwen3")
    w.add_name(f"random {name}")
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
    w.add_block_count(c["n_layer"])
    w.add_context_length(CTX)
    w.add_embedding_length(c["hidden"])
    w.add_feed_forward_length(c["ffn"])
    w.add_head_count(c["n_head"])
    w.add_head_count_kv(c["n_kv"])
    w.add_key_length(c["head_dim"])
    w.add_value_length(c["head_dim"])
    w.add_rope_freq_base(THETA)
    w.add_layer_norm_rms_eps(EPS)
    for key, value, vtype, sub in vocab_fields():
        w.add_key_value(key, value, vtype, sub_type=sub)
    D, q, kv, F = c["hidden"], c["n_head"] * c["head_dim"], c["n_kv"] * c["head_dim"], c["ffn"]
    q8 = gguf.GGMLQuantizationType.Q8_0
    ones = lambda n: np.ones(n, np.float32)          # noqa: E731
    w.add_tensor("token_embd.weight", random_q8_0(N_VOCAB, D, rng), raw_dtype=q8)
    for il in range(c["n_layer"]):
        p = f"blk.{il}."
        for t, (rows, cols) in (("attn_q", (q, D)), ("attn_k", (kv, D)), ("attn_v", (kv, D)),
                                ("attn_output", (D, q)), ("ffn_gate", (F, D)), ("ffn_up", (F, D)),
                                ("ffn_down", (D, F))):
            w.add_tensor(p + t + ".weight", random_q8_0(rows, cols, rng), raw_dtype=q8)
        for t, n in (("attn_norm", D), ("ffn_norm", D), ("attn_q_norm", c["head_dim"]),
                     ("attn_k_norm", c["head_dim"])):
            w.add_tensor(p + t + ".weight", ones(n))
    w.add_tensor("output_norm.weight", ones(D))
    if not c["tied"]:
        w.add_tensor("output.weight", random_q8_0(N_VOCAB, D, rng), raw_dtype=q8)
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
    a = ap.parse_args()
    out = write(a.model, a.path, a.seed, a.layers)
    print(f"wrote {out} ({out.stat().st_size / 2**30:.2f} GiB)")
