#!/usr/bin/env python3
"""Our quantizers (tffedu.quant.quantize) against llama.cpp's `llama-quantize` on the same weights.

    python benchmarks/quantize_vs_llamacpp.py --llama-quantize PATH [--model GGUF] [--layers 4]
        [--out benchmarks/results/quantize_vs_llamacpp.json]

The weights are a real model's (SmolLM2-135M by default, its first LAYERS blocks), dequantized to
float32 and written as an F32 GGUF; `llama-quantize --pure` then writes it in each type (no mixture:
every 2-D tensor in that type, or llama.cpp's fallback where a row is not whole 256-blocks), and
we quantize the same float32 tensors ourselves. Per type: the RMS error of each side relative to
the weights' RMS, over the tensors both wrote in that type, and the share of identical blocks.
Bit equality is not the goal for the K-quants (the float sums of the scale search run in another
order), close error is.
"""
import argparse
import json
import pathlib
import subprocess
import sys
import tempfile

import gguf
import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tffedu.quant import block_format, dequantize, quantize   # noqa: E402

TYPES = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K", "Q5_K", "Q6_K"]


def write_f32(src: str, dst: str, n_layers: int) -> dict:
    "SRC's first n_layers blocks with every tensor dequantized to F32; returns name -> float32 array."
    r = gguf.GGUFReader(src)
    arch = r.fields["general.architecture"].contents()
    w = gguf.GGUFWriter(dst, arch)
    for name, f in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        value = n_layers if name == f"{arch}.block_count" else 0 if name == "general.file_type" else f.contents()
        sub = f.types[-1] if f.types[0] == gguf.GGUFValueType.ARRAY else None
        w.add_key_value(name, value, f.types[0], sub_type=sub)
    weights = {}
    for t in r.tensors:
        if t.name.startswith("blk.") and int(t.name.split(".")[1]) >= n_layers:
            continue
        x = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        weights[t.name] = x
        w.add_tensor(t.name, x)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return weights


def compare(weights: dict, path: str, qtype: str) -> dict:
    "Error of both sides over the tensors llama-quantize wrote in `qtype`."
    r = gguf.GGUFReader(path)
    err_ours = err_ref = sq = 0.0
    same = blocks = 0
    names = []
    for t in r.tensors:
        if t.tensor_type.name != qtype or len(t.shape) != 2:
            continue
        x = weights[t.name]
        ref_raw = np.asarray(t.data, np.uint8).reshape(x.shape[0], -1)
        ours_raw = quantize(x, qtype)
        assert ours_raw.shape == ref_raw.shape, (t.name, ours_raw.shape, ref_raw.shape)
        err_ours += float(((dequantize(ours_raw, qtype, x.shape) - x) ** 2).sum())
        err_ref += float(((dequantize(ref_raw, qtype, x.shape) - x) ** 2).sum())
        sq += float((x.astype(np.float64) ** 2).sum())
        size = block_format(qtype).type_size
        a, b = ours_raw.reshape(-1, size), ref_raw.reshape(-1, size)
        same += int((a == b).all(axis=1).sum())
        blocks += len(a)
        names.append(t.name)
    if not names:
        return {"type": qtype, "tensors": 0}
    return {"type": qtype, "tensors": len(names), "blocks": blocks,
            "ours_rel_rms": (err_ours / sq) ** 0.5, "llamacpp_rel_rms": (err_ref / sq) ** 0.5,
            "identical_blocks": same / blocks}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--llama-quantize", required=True, help="path of llama.cpp's llama-quantize")
    ap.add_argument("--model", help="a GGUF model (default: SmolLM2-135M, tffedu's default model)")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--out", type=pathlib.Path, default=ROOT / "benchmarks/results/quantize_vs_llamacpp.json")
    a = ap.parse_args()
    if a.model is None:
        from tffedu.assets import default_model_path
        a.model = str(default_model_path())
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        f32 = f"{tmp}/f32.gguf"
        weights = write_f32(a.model, f32, a.layers)
        for qtype in TYPES:
            out = f"{tmp}/{qtype}.gguf"
            subprocess.run([a.llama_quantize, "--pure", f32, out, qtype], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            rows.append(compare(weights, out, qtype))
            pathlib.Path(out).unlink()
            print(json.dumps(rows[-1]))
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps({"model": pathlib.Path(a.model).name, "layers": a.layers,
                                 "rows": rows}, indent=1) + "\n")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
