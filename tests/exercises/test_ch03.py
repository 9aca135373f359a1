"""Chapter 03 exercises: a GGUF header, strings and the metadata walk by hand. Files are written by
gguf-py (llama.cpp's package) and its reader is the reference."""
import gguf
import numpy as np
import pytest


@pytest.fixture(scope="module")
def gguf_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("gguf") / "t.gguf"
    w = gguf.GGUFWriter(str(path), "qwen3")
    w.add_uint32("qwen3.block_count", 28)
    w.add_float32("qwen3.rope.freq_base", 1e6)
    w.add_bool("tokenizer.ggml.add_bos_token", False)
    w.add_string("tokenizer.chat_template", "{{ messages }} — ünïcode")
    w.add_array("tokenizer.ggml.tokens", ["a", "bc", "ĠHello", "<|im_end|>"])
    w.add_array("tokenizer.ggml.token_type", [1, 1, 1, 3])
    w.add_array("x.nested", [[1, 2], [3]])
    w.add_int64("x.big", -2**40)
    w.add_float64("x.pi", 3.141592653589793)
    w.add_tensor("w", np.zeros((2, 32), np.float32))
    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
    return path


def test_ch03_1_read_header(impl, gguf_file):
    r = gguf.GGUFReader(gguf_file)
    buf = gguf_file.read_bytes()
    ref = (int(r.fields["GGUF.version"].parts[-1][0]), len(r.tensors),
           int(r.fields["GGUF.kv_count"].parts[-1][0]))
    assert tuple(impl.read_header(buf)) == ref
    with pytest.raises(ValueError):
        impl.read_header(b"GGML" + buf[4:])


def test_ch03_2_read_string(impl, gguf_file):
    r = gguf.GGUFReader(gguf_file)
    buf = gguf_file.read_bytes()
    for name in ("general.architecture", "tokenizer.chat_template"):
        field = r.fields[name]
        pos = int(field.offset) + 8 + len(name.encode()) + 4          # key, then the value type
        value, end = impl.read_string(buf, pos)
        assert value == field.contents(), name
        assert end == pos + 8 + len(value.encode()), name


def test_ch03_3_metadata_keys(impl, gguf_file):
    r = gguf.GGUFReader(gguf_file)
    ref = [k for k in r.fields if not k.startswith("GGUF.")]
    assert list(impl.metadata_keys(gguf_file.read_bytes())) == ref


def _chars_not_bytes(buf, pos):
    import struct
    (n,) = struct.unpack_from("<Q", buf, pos)
    s = bytes(buf[pos + 8:pos + 8 + n]).decode("utf-8")
    return s, pos + 8 + len(s)              # counts characters: wrong past the first non-ASCII one


def _flat_arrays(buf):
    import struct
    from solutions.ch03 import SCALAR_SIZES, read_header, read_string
    _, _, n_kv = read_header(buf)
    pos, keys = 24, []
    for _ in range(n_kv):
        key, pos = read_string(buf, pos)
        (vt,) = struct.unpack_from("<I", buf, pos)
        pos += 4
        if vt == 8:
            pos = read_string(buf, pos)[1]
        elif vt == 9:                        # assumes arrays of scalars or strings, never nested
            et, count = struct.unpack_from("<IQ", buf, pos)
            pos += 12
            for _ in range(count):
                pos = read_string(buf, pos)[1] if et == 8 else pos + SCALAR_SIZES.get(et, 12)
        else:
            pos += SCALAR_SIZES[vt]
        keys.append(key)
    return keys


WRONG = {"test_ch03_1_read_header": {"32-bit-counts": {
             "read_header": lambda b: __import__("struct").unpack_from("<4xIII", b, 0)}},
         "test_ch03_2_read_string": {"characters": {"read_string": _chars_not_bytes}},
         "test_ch03_3_metadata_keys": {"no-nested-arrays": {"metadata_keys": _flat_arrays}}}
