"""A fast GGUF (re)writer for tests that make many variants of one model file (fuzzing, malformed
inputs): read a file once (metadata, value types, raw tensor bytes), change keys or tensors, and
serialize the bytes directly — microseconds per variant instead of gguf-py's writer. The seed
files themselves are written by gguf-py (tests/hf_models.py); this only re-packs them, with the
layout of gguf_util's hand-crafted helpers (header, kv entries, tensor infos, aligned data)."""
from __future__ import annotations

import struct

import numpy as np

from gguf_util import gguf_kv, gguf_string, gguf_tensor_info
from tffedu.gguf import GGUFFile, ValueType as V

_FMT = {V.UINT8: "B", V.INT8: "b", V.UINT16: "H", V.INT16: "h", V.UINT32: "I", V.INT32: "i",
        V.FLOAT32: "f", V.BOOL: "?", V.UINT64: "Q", V.INT64: "q", V.FLOAT64: "d"}
_NP = {np.dtype(np.uint8): V.UINT8, np.dtype(np.int8): V.INT8, np.dtype(np.uint16): V.UINT16,
       np.dtype(np.int16): V.INT16, np.dtype(np.uint32): V.UINT32, np.dtype(np.int32): V.INT32,
       np.dtype(np.float32): V.FLOAT32, np.dtype(np.bool_): V.BOOL, np.dtype(np.uint64): V.UINT64,
       np.dtype(np.int64): V.INT64, np.dtype(np.float64): V.FLOAT64}


def element_type(value) -> V:
    "The GGUF type of an array's elements."
    if isinstance(value, np.ndarray):
        return _NP[value.dtype]
    if not len(value):
        return V.UINT32
    x = value[0]
    if isinstance(x, str):
        return V.STRING
    if isinstance(x, (list, tuple, np.ndarray)):
        return V.ARRAY
    if isinstance(x, bool):
        return V.BOOL
    return V.INT64 if isinstance(x, int) else V.FLOAT32


def pack(vtype: V, value) -> bytes:
    "The payload of one value of type `vtype` (after its type tag)."
    if vtype == V.STRING:
        return gguf_string(value)
    if vtype == V.ARRAY:
        et = element_type(value)
        if isinstance(value, np.ndarray) and et != V.BOOL:
            body = value.astype(value.dtype.newbyteorder("<")).tobytes()
        else:
            body = b"".join(pack(et, x) for x in value)
        return struct.pack("<IQ", et, len(value)) + body
    if vtype == V.FLOAT32:       # as a float32, like a writer would store it (1e300 -> inf)
        with np.errstate(over="ignore"):
            return np.float32(value).tobytes()
    return struct.pack("<" + _FMT[vtype], value)


def read_model(path):
    "(metadata, types, tensors) of a GGUF file: tensors are name -> (ggml type, shape, bytes)."
    with GGUFFile(path) as f:
        meta = dict(f.metadata)
        types = dict(f.metadata_types)
        tensors = {n: (t.ggml_type, t.shape, f.raw(n).tobytes()) for n, t in f.tensors.items()}
    return meta, types, tensors


def build(meta: dict, types: dict, tensors: dict, alignment: int = 32) -> bytes:
    "The bytes of a GGUF v3 file; `types[key]` says how to store `meta[key]`."
    kvs = [gguf_kv(k, types[k], pack(types[k], v)) for k, v in meta.items()]
    infos, data = [], bytearray()
    for name, (t, shape, raw) in tensors.items():
        data += b"\0" * (-len(data) % alignment)
        infos.append(gguf_tensor_info(name, tuple(reversed(shape)), t, len(data)))
        data += raw
    head = b"GGUF" + struct.pack("<IQQ", 3, len(infos), len(kvs))
    body = head + b"".join(kvs) + b"".join(infos)
    return body + b"\0" * (-len(body) % alignment) + bytes(data)
