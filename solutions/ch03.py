"""Chapter 03 (GGUF, part 1: the reader): reference solutions."""
import struct

__all__ = ["read_header", "read_string", "metadata_keys"]

# bytes of each scalar metadata value type (GGUF's gguf_type: 0..12; 8 = STRING, 9 = ARRAY)
SCALAR_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def read_header(buf):
    """Exercise 03.1 (easy): (version, tensor_count, kv_count) from the first 24 bytes of a GGUF
    file (`buf` is bytes); a ValueError when the magic is not b"GGUF"."""
    magic, version, n_tensors, n_kv = struct.unpack_from("<4sIQQ", buf, 0)
    if magic != b"GGUF":
        raise ValueError(f"not a GGUF file (magic {magic!r})")
    return version, n_tensors, n_kv


def read_string(buf, pos):
    """Exercise 03.2 (easy): a GGUF string at byte `pos` (uint64 length, then UTF-8 bytes):
    return (the str, the position just after it)."""
    (n,) = struct.unpack_from("<Q", buf, pos)
    return bytes(buf[pos + 8:pos + 8 + n]).decode("utf-8"), pos + 8 + n


def _skip_value(buf, pos, vtype):
    if vtype in SCALAR_SIZES:
        return pos + SCALAR_SIZES[vtype]
    if vtype == 8:
        return read_string(buf, pos)[1]
    if vtype == 9:
        etype, count = struct.unpack_from("<IQ", buf, pos)
        pos += 12
        if etype in SCALAR_SIZES:
            return pos + count * SCALAR_SIZES[etype]
        for _ in range(count):
            pos = _skip_value(buf, pos, etype)
        return pos
    raise ValueError(f"unknown value type {vtype} at byte {pos}")


def metadata_keys(buf):
    """Exercise 03.3 (hard): every metadata key of a GGUF file, in file order, walking the kv section
    by hand: key (string), value type (uint32), value — skip scalars by their size, strings by their
    length, arrays (element type uint32, count uint64, elements; arrays can nest) element by element."""
    _, _, n_kv = read_header(buf)
    pos, keys = 24, []
    for _ in range(n_kv):
        key, pos = read_string(buf, pos)
        (vtype,) = struct.unpack_from("<I", buf, pos)
        pos = _skip_value(buf, pos + 4, vtype)
        keys.append(key)
    return keys
