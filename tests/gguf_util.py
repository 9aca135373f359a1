"""Helpers that write small GGUF files with gguf-py's GGUFWriter (the reference writer).

Used by the chapter-03 tests and available to every other test: `write_gguf` for arbitrary
metadata and tensors, `random_blocks` for random quantized blocks (with extreme or non-finite
scales on request), `set_version` to turn a v3 file into a v2 one.
"""
from __future__ import annotations

import pathlib

import gguf
import numpy as np
from gguf import GGMLQuantizationType as Q, GGUFValueType as V

BLOCKS = {  # name -> (block_size, type_size), from gguf-py itself
    t.name: gguf.GGML_QUANT_SIZES[t] for t in Q if t in gguf.GGML_QUANT_SIZES}

# byte ranges of the float16 scales inside one block of each format (ggml-common.h)
F16_FIELDS = {
    "Q8_0": [0], "Q4_0": [0], "Q4_1": [0, 2], "Q5_0": [0], "Q5_1": [0, 2],
    "Q4_K": [0, 2], "Q5_K": [0, 2], "Q6_K": [208],
    "Q2_K": [80, 82], "Q3_K": [108], "IQ4_NL": [0], "IQ4_XS": [0],
}


def random_blocks(qtype: str, n_blocks: int, rng: np.random.Generator,
                  scales: str = "normal") -> np.ndarray:
    """`(n_blocks, type_size)` uint8 of random blocks. `scales` picks the float16 scale fields:
    'normal' (|d| ~ 1e-3..1), 'extreme' (subnormals, zeros, +-65504, tiny and huge), or
    'nonfinite' (some inf and nan among them)."""
    block_size, type_size = BLOCKS[qtype]
    if qtype in ("F16", "BF16", "F32"):
        if qtype == "F32":
            return rng.standard_normal(n_blocks).astype(np.float32).view(np.uint8).reshape(n_blocks, 4)
        raw = rng.integers(0, 1 << 16, n_blocks, dtype=np.uint16)  # every bit pattern, nan/inf too
        return raw.view(np.uint8).reshape(n_blocks, 2)
    blocks = rng.integers(0, 256, (n_blocks, type_size), dtype=np.uint8)
    for at in F16_FIELDS[qtype]:
        if scales == "normal":
            d = (rng.uniform(1e-3, 1.0, n_blocks) * rng.choice([-1, 1], n_blocks)).astype(np.float16)
        else:
            pool = [0.0, -0.0, 6e-8, -6e-8, 6.1e-5, 1e-4, 65504.0, -65504.0, 1e4, 0.5, 3.0e-2]
            if scales == "nonfinite":
                pool += [np.inf, -np.inf, np.nan]
            d = np.array(rng.choice(pool, n_blocks), dtype=np.float16)
        blocks[:, at:at + 2] = d.view(np.uint8).reshape(n_blocks, 2)
    return blocks


def add_metadata(w: gguf.GGUFWriter, metadata: dict) -> None:
    "Write key -> value (a numpy array as a list), or key -> (value, GGUFValueType[, sub]), with the writer's types."
    for key, val in metadata.items():
        val = val.tolist() if isinstance(val, np.ndarray) else val
        if isinstance(val, tuple):
            w.add_key_value(key, *val)
        elif isinstance(val, list):
            w.add_array(key, val)
        elif isinstance(val, str):
            w.add_string(key, val)
        elif isinstance(val, bool):
            w.add_bool(key, val)
        elif isinstance(val, int):
            w.add_uint32(key, val) if val >= 0 else w.add_int32(key, val)
        elif isinstance(val, float):
            w.add_float32(key, val)
        else:
            raise TypeError(f"{key}: give (value, GGUFValueType) for {type(val)}")


def write_gguf(path, metadata=None, tensors=None, arch: str = "llama", alignment: int | None = None):
    """Write a GGUF v3 file. `metadata`: key -> value, or key -> (value, GGUFValueType[, sub]).
    `tensors`: name -> float numpy array (F32/F16 by its dtype), or name -> (raw uint8 blocks of
    shape (..., bytes per row), 'Q4_K'), or name -> (array, 'BF16') with a uint16 array of bits."""
    path = pathlib.Path(path)
    w = gguf.GGUFWriter(str(path), arch)
    if alignment is not None:
        w.add_custom_alignment(alignment)
    add_metadata(w, metadata or {})
    for name, t in (tensors or {}).items():
        if isinstance(t, tuple):
            data, qtype = t
            w.add_tensor(name, np.ascontiguousarray(data).view(np.uint8)
                         if qtype not in ("F32", "F16") else data, raw_dtype=Q[qtype])
        else:
            w.add_tensor(name, np.ascontiguousarray(t))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def set_version(path, version: int):
    "Overwrite the version field (bytes 4..8); v2 and v3 share the little-endian layout."
    with open(path, "r+b") as f:
        f.seek(4)
        f.write(int(version).to_bytes(4, "little"))
    return path


ALL_SCALAR_TYPES = {
    "t.u8": (200, V.UINT8), "t.i8": (-100, V.INT8), "t.u16": (60000, V.UINT16),
    "t.i16": (-30000, V.INT16), "t.u32": (4_000_000_000, V.UINT32), "t.i32": (-2_000_000_000, V.INT32),
    "t.f32": (0.1, V.FLOAT32), "t.bool": (True, V.BOOL), "t.str": ("héllo, 世界 👋", V.STRING),
    "t.u64": (2**63 + 5, V.UINT64), "t.i64": (-(2**62), V.INT64), "t.f64": (1 / 3, V.FLOAT64),
    "t.empty_str": ("", V.STRING),
    "t.arr_i32": ([1, -2, 3], V.ARRAY, V.INT32), "t.arr_f32": ([0.5, -1.25, 1e30], V.ARRAY, V.FLOAT32),
    "t.arr_u8": ([0, 255, 7], V.ARRAY, V.UINT8), "t.arr_bool": ([True, False, True], V.ARRAY, V.BOOL),
    "t.arr_u64": ([0, 2**64 - 1], V.ARRAY, V.UINT64), "t.arr_f64": ([1e-300, -2.5], V.ARRAY, V.FLOAT64),
    "t.arr_str": (["a", "", "Ġt", "日本語", "<|im_end|>"], V.ARRAY, V.STRING),
    "t.arr_nested": ([[1, 2], [3], [4, 5, 6]], V.ARRAY, V.ARRAY),
    "t.arr_nested_str": ([["x", "y"], ["z"]], V.ARRAY, V.ARRAY),
}


# --- hand-crafted (possibly malformed) files: what GGUFWriter refuses to write -----------------
import struct  # noqa: E402


def gguf_string(s) -> bytes:
    b = s.encode("utf-8") if isinstance(s, str) else bytes(s)
    return struct.pack("<Q", len(b)) + b


def gguf_kv(key, vtype: int, payload: bytes) -> bytes:
    "One metadata entry: key, type tag, raw payload bytes (already packed)."
    return gguf_string(key) + struct.pack("<I", vtype) + payload


def gguf_tensor_info(name, ne, ggml_type: int, offset: int) -> bytes:
    return (gguf_string(name) + struct.pack("<I", len(ne)) + struct.pack(f"<{len(ne)}Q", *ne)
            + struct.pack("<IQ", ggml_type, offset))


def build_gguf(kvs=(), infos=(), data: bytes = b"", version: int = 3, alignment: int = 32,
               n_kv=None, n_tensors=None, magic: bytes = b"GGUF") -> bytes:
    """Bytes of a GGUF file from packed kv entries and tensor infos; the data section starts at
    the next multiple of `alignment`. `n_kv`/`n_tensors` override the counts (to lie)."""
    head = magic + struct.pack("<IQQ", version, len(infos) if n_tensors is None else n_tensors,
                               len(kvs) if n_kv is None else n_kv)
    body = head + b"".join(kvs) + b"".join(infos)
    pad = -len(body) % alignment
    return body + b"\0" * pad + data


# --- the real model through gguf-py, parsed once per test session (gguf-py takes seconds) ----------
import functools  # noqa: E402


@functools.cache
def smollm2_reader():
    "(path, gguf.GGUFReader) of the default SmolLM2 GGUF, shared by every test module."
    from tffedu.assets import default_model_path
    path = default_model_path(quiet=True)
    return path, gguf.GGUFReader(path)
