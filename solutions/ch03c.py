"""Chapter 03c (safetensors): reference solutions."""
import json
import struct

import numpy as np

__all__ = ["read_header", "load_tensor"]


def read_header(path):
    """Exercise 03c.1 (easy): the JSON header of a .safetensors file (uint64 little-endian length,
    then that many bytes of JSON) as a dict, without the "__metadata__" entry."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    header.pop("__metadata__", None)
    return header


def load_tensor(path, name):
    """Exercise 03c.2 (medium): one tensor of a .safetensors file as float32 numpy, of its shape.
    Its data_offsets count from the end of the header; dtypes F32, F16 and BF16 (the upper 16 bits
    of a float32)."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        info = json.loads(f.read(n))[name]
        start, end = info["data_offsets"]
        f.seek(8 + n + start)
        raw = f.read(end - start)
    if info["dtype"] == "BF16":
        a = (np.frombuffer(raw, np.uint16).astype(np.uint32) << 16).view(np.float32)
    else:
        a = np.frombuffer(raw, {"F32": np.float32, "F16": np.float16}[info["dtype"]]).astype(np.float32)
    return a.reshape(info["shape"])
