"""Chapter 03 (GGUF, part 1: the reader): your answers.

Write each function, then check it: python -m tffedu.exercises ch03
(the reference answers are in solutions/ch03.py: look once you have tried)
"""
import struct
__all__ = ['read_header', 'read_string', 'metadata_keys']

# bytes of each scalar metadata value type (GGUF's gguf_type: 0..12; 8 = STRING, 9 = ARRAY)
SCALAR_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def read_header(buf):
    """Exercise 03.1 (easy): (version, tensor_count, kv_count) from the first 24 bytes of a GGUF
    file (`buf` is bytes); a ValueError when the magic is not b"GGUF"."""
    raise NotImplementedError("ch03: read_header is yours to write")


def read_string(buf, pos):
    """Exercise 03.2 (easy): a GGUF string at byte `pos` (uint64 length, then UTF-8 bytes):
    return (the str, the position just after it)."""
    raise NotImplementedError("ch03: read_string is yours to write")


def metadata_keys(buf):
    """Exercise 03.3 (hard): every metadata key of a GGUF file, in file order, walking the kv section
    by hand: key (string), value type (uint32), value — skip scalars by their size, strings by their
    length, arrays (element type uint32, count uint64, elements; arrays can nest) element by element."""
    raise NotImplementedError("ch03: metadata_keys is yours to write")
