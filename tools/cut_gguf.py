#!/usr/bin/env python3
"""Cut a GGUF model to its first N transformer blocks: the same tensors (bytes unchanged), the same
metadata but `<arch>.block_count`, written with gguf-py so HF transformers and llama.cpp load it too.

    python tools/cut_gguf.py SRC.gguf DST.gguf --layers 2

tests/test_gpu_model.py checks real weights on the GPU with such a cut (small, and HF transformers
loads it in a second).
"""
import argparse
import re

import gguf


def cut(src: str, dst: str, n_layers: int) -> None:
    r = gguf.GGUFReader(src)
    arch = r.fields["general.architecture"].contents()
    w = gguf.GGUFWriter(dst, arch)
    for name, f in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue                                   # the writer makes these itself
        value = n_layers if name == f"{arch}.block_count" else f.contents()
        sub = f.types[-1] if f.types[0] == gguf.GGUFValueType.ARRAY else None
        w.add_key_value(name, value, f.types[0], sub_type=sub)
    for t in r.tensors:
        m = re.match(r"blk\.(\d+)\.", t.name)
        if m and int(m.group(1)) >= n_layers:
            continue
        w.add_tensor(t.name, t.data, raw_shape=list(reversed(t.shape.tolist())) if t.tensor_type in
                     (gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16) else t.data.shape,
                     raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--layers", type=int, default=2)
    a = ap.parse_args()
    cut(a.src, a.dst, a.layers)
