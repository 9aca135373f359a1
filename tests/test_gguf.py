"""The hand-written GGUF reader against gguf-py's GGUFReader (the reference), on the real SmolLM2
file, the shared vocabulary files, and files written by GGUFWriter; then malformed files, each of
which must raise GGUFError naming the key or byte offset."""
import pathlib
import struct

import gguf
import numpy as np
import pytest
from gguf import GGUFValueType as V

from tffedu.errors import GGUFError, ShapeError
from tffedu.gguf import GGUFFile, ValueType
from tffedu.quant import DEQUANTIZE, dequantize_tensor
from conftest import DATA
from gguf_util import (ALL_SCALAR_TYPES, BLOCKS, build_gguf, gguf_kv, gguf_string,
                       gguf_tensor_info, random_blocks, set_version, smollm2_reader, write_gguf)


def flatten(v):
    "gguf-py flattens nested arrays: do the same to ours before comparing."
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, list):
        return [x for item in v for x in (flatten(item) if isinstance(item, (list, np.ndarray)) else [item])]
    return v


def assert_same_as_gguf_py(path, dequant=True, ref=None):
    ref = ref or gguf.GGUFReader(path)
    with GGUFFile(path) as f:
        assert f.version == ref.fields["GGUF.version"].contents()
        keys = [k for k in ref.fields if not k.startswith("GGUF.")]
        assert list(f.metadata) == keys                       # same keys, same order
        for k in keys:
            field = ref.fields[k]
            assert f.metadata_types[k] == int(field.types[0]), k
            assert flatten(f.metadata[k]) == field.contents(), k
        assert f.alignment == ref.alignment and f.data_offset == ref.data_offset
        assert list(f.tensors) == [t.name for t in ref.tensors]
        for t in ref.tensors:
            ti = f.tensors[t.name]
            assert ti.ne == tuple(int(x) for x in t.shape), t.name
            assert ti.ggml_type == int(t.tensor_type) and ti.type_name == t.tensor_type.name
            assert (ti.offset, ti.nbytes, ti.numel) == (t.data_offset, t.n_bytes, t.n_elements)
            raw = f.raw(t.name)
            assert raw.tobytes() == t.data.tobytes(), t.name
            if dequant and ti.type_name in DEQUANTIZE:
                want = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
                got = dequantize_tensor(f, t.name)
                assert got.shape == want.shape == ti.shape
                assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), t.name
    return ref


# --- real files -----------------------------------------------------------------------------
def test_smollm2_equals_gguf_py():
    path, ref = smollm2_reader()
    assert_same_as_gguf_py(path, dequant=False, ref=ref)   # every byte of every tensor
    assert len(ref.tensors) == 272


def test_smollm2_dequantize_sample():
    "Dequantize one tensor of each type in the file (Q4_1, Q8_0, F32) against gguf-py."
    smollm2_path, ref = smollm2_reader()
    seen = {}
    for t in ref.tensors:
        seen.setdefault(t.tensor_type.name, t)
    assert {"Q4_1", "Q8_0", "F32"} <= set(seen)
    with GGUFFile(smollm2_path) as f:
        for name, t in seen.items():
            want = gguf.quants.dequantize(t.data, t.tensor_type)
            assert np.array_equal(dequantize_tensor(f, t.name).view(np.uint32), want.view(np.uint32)), name


@pytest.mark.slow  # gguf-py's reader takes ~12 s on a 150k-token vocabulary
@pytest.mark.parametrize("name", ["ggml-vocab-qwen2.gguf", "ggml-vocab-llama-bpe.gguf"])
def test_vocab_files_equal_gguf_py(name):
    path = DATA / name
    if not path.exists():
        pytest.skip(f"{path} not present")
    assert_same_as_gguf_py(path)


# --- files written by GGUFWriter --------------------------------------------------------------
QTYPES = ["F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q6_K"]


def _tensors(rng):
    out = {}
    for i, q in enumerate(QTYPES):
        bs, ts = BLOCKS[q]
        if q == "F32":
            out[f"t.{q}"] = rng.standard_normal((3, 5)).astype(np.float32)
        elif q == "F16":
            out[f"t.{q}"] = rng.standard_normal((2, 2, 7)).astype(np.float16)
        else:
            rows, row_len = 2 + i % 3, 2 * 256      # row length: whole blocks of every type
            out[f"t.{q}"] = (random_blocks(q, rows * row_len // bs, rng).reshape(rows, -1), q)
    out["t.4d"] = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    out["t.1d"] = rng.standard_normal(7).astype(np.float32)
    return out


@pytest.mark.parametrize("alignment", [None, 64, 1])
def test_writer_file_equals_gguf_py(tmp_path, alignment):
    rng = np.random.default_rng(0)
    path = write_gguf(tmp_path / "t.gguf", ALL_SCALAR_TYPES, _tensors(rng), alignment=alignment)
    assert_same_as_gguf_py(path)
    with GGUFFile(path) as f:
        # values we wrote, read back with their types
        assert f.metadata["t.str"] == "héllo, 世界 👋" and f.metadata["t.bool"] is True
        assert f.metadata["t.u64"] == 2**63 + 5 and f.metadata_types["t.u64"] == ValueType.UINT64
        assert f.metadata["t.f32"] == float(np.float32(0.1))
        assert f.metadata["t.arr_str"] == ["a", "", "Ġt", "日本語", "<|im_end|>"]
        assert f.metadata["t.arr_f32"].dtype == np.float32
        assert f.metadata["t.arr_bool"].tolist() == [True, False, True]
        nested = f.metadata["t.arr_nested"]          # gguf-py flattens these; we keep the nesting
        assert [x.tolist() for x in nested] == [[1, 2], [3], [4, 5, 6]]
        assert f.metadata["t.arr_nested_str"] == [["x", "y"], ["z"]]
        assert f.tensors["t.4d"].shape == (2, 3, 4, 5)
        np.testing.assert_array_equal(dequantize_tensor(f, "t.4d"), _tensors(np.random.default_rng(0))["t.4d"])
        assert f.alignment == (alignment or 32)


def test_v2_header(tmp_path):
    rng = np.random.default_rng(1)
    path = write_gguf(tmp_path / "v2.gguf", {"a.b": 7, "tokenizer.ggml.tokens": ["x", "y"]},
                      {"w": rng.standard_normal((4, 8)).astype(np.float32)})
    set_version(path, 2)
    ref = assert_same_as_gguf_py(path)
    assert ref.fields["GGUF.version"].contents() == 2


def test_raw_is_a_view_of_the_map(tmp_path):
    path = write_gguf(tmp_path / "v.gguf", {}, {"w": np.arange(64, dtype=np.float32)})
    f = GGUFFile(path)
    a, b = f.raw("w"), f.raw("w")
    assert not a.flags.owndata and not a.flags.writeable and np.shares_memory(a, b)
    f.close()            # views alive: the map stays until they die, reading is still safe
    assert a.view(np.float32)[5] == 5.0
    with pytest.raises(GGUFError, match="closed"):
        f.raw("w")
    del a, b


def test_empty_file_and_missing_tensor(tmp_path):
    path = write_gguf(tmp_path / "e.gguf")
    with GGUFFile(path) as f:
        assert f.tensors == {} and f.arch == "llama"
        with pytest.raises(GGUFError, match="no tensor named 'nope'"):
            f.raw("nope")


# --- malformed files: each error names the key or byte offset -------------------------------
def _file(tmp_path, data: bytes) -> pathlib.Path:
    p = tmp_path / "bad.gguf"
    p.write_bytes(data)
    return p


U32 = lambda v: struct.pack("<I", v)  # noqa: E731
F32_ROW = np.arange(8, dtype=np.float32).tobytes()

BAD = {
    "too small": (b"GGUF\3\0\0\0", "too small"),
    "magic": (b"GGML" + bytes(40), "not a GGUF file: magic bytes b'GGML'"),
    "version 1": (build_gguf(version=1), "GGUF version 1 is not supported"),
    "version 4": (build_gguf(version=4), "version 4"),
    "big endian": (b"GGUF" + struct.pack(">IQQ", 3, 0, 0), "big-endian"),
    "kv count lies": (build_gguf(n_kv=2**40), "header claims 1099511627776 keys"),
    "tensor count lies": (build_gguf(n_tensors=2**63), "tensors"),
    "key length past end": (build_gguf([struct.pack("<Q", 2**62) + b"abc"]), "length|bytes"),
    "unknown value type": (build_gguf([gguf_kv("k.x", 13, b"")]), "key 'k.x': unknown value type 13"),
    "string value past end": (build_gguf([gguf_kv("k.s", 8, struct.pack("<Q", 10**12))]),
                              "value of key 'k.s'"),
    "array count huge": (build_gguf([gguf_kv("k.a", 9, U32(4) + struct.pack("<Q", 2**60))]),
                         "array 'k.a' of 1152921504606846976 UINT32"),
    "array of strings huge": (build_gguf([gguf_kv("k.t", 9, U32(8) + struct.pack("<Q", 10**9))]),
                              "array 'k.t'"),
    "array type unknown": (build_gguf([gguf_kv("k.u", 9, U32(77) + struct.pack("<Q", 1))]),
                           "key 'k.u': unknown value type 77"),
    "nested too deep": (build_gguf([gguf_kv("k.n", 9, (U32(9) + struct.pack("<Q", 1)) * 20)]),
                        "key 'k.n': arrays nested deeper"),
    "duplicate key": (build_gguf([gguf_kv("k.d", 4, U32(1))] * 2), "duplicate metadata key 'k.d'"),
    "bad utf-8 key": (build_gguf([gguf_kv(b"\xff\xfe", 4, U32(1))]), "not valid UTF-8"),
    "alignment 0": (build_gguf([gguf_kv("general.alignment", 4, U32(0))]), "general.alignment"),
    "alignment 3": (build_gguf([gguf_kv("general.alignment", 4, U32(3))]), "power of two"),
    "alignment type": (build_gguf([gguf_kv("general.alignment", 10, struct.pack("<Q", 32))]),
                       "general.alignment must be a uint32"),
    "n_dims 5": (build_gguf(infos=[gguf_tensor_info("w", [1] * 5, 0, 0)]),
                 "tensor 'w' has 5 dimensions"),
    "n_dims 0": (build_gguf(infos=[gguf_tensor_info("w", [], 0, 0)]), "tensor 'w' has 0"),
    "unknown ggml type": (build_gguf(infos=[gguf_tensor_info("w", [8], 5, 0)], data=F32_ROW),
                          "tensor 'w'.*unknown ggml type 5"),
    "row not whole blocks": (build_gguf(infos=[gguf_tensor_info("w", [16], 8, 0)], data=bytes(64)),
                             "row length 16 is not a multiple of the Q8_0 block size 32"),
    "data past end": (build_gguf(infos=[gguf_tensor_info("w", [8, 2], 0, 0)], data=F32_ROW),
                      "tensor 'w'.*runs past the end"),
    "offset past end": (build_gguf(infos=[gguf_tensor_info("w", [8], 0, 2**64 - 32)], data=F32_ROW),
                        "runs past the end"),
    "misaligned offset": (build_gguf(infos=[gguf_tensor_info("w", [2], 0, 4)], data=F32_ROW),
                          "offset 4 is not a multiple of the alignment 32"),
    "zero dim": (build_gguf(infos=[gguf_tensor_info("w", [8, 0], 0, 0)], data=F32_ROW),
                 "tensor 'w'.*include a zero"),
    "huge dims": (build_gguf(infos=[gguf_tensor_info("w", [2**32, 2**32, 2**32, 2**32], 0, 0)]),
                  "runs past the end"),
    "duplicate tensor": (build_gguf(infos=[gguf_tensor_info("w", [2], 0, 0)] * 2, data=F32_ROW),
                         "duplicate tensor name 'w'"),
    "tensor info truncated": (build_gguf(infos=[gguf_string("w") + U32(2)])[:-2], "at byte"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_malformed(tmp_path, case):
    data, pattern = BAD[case]
    with pytest.raises(GGUFError, match=pattern) as e:
        GGUFFile(_file(tmp_path, data))
    assert "bad.gguf" in str(e.value)
    assert "byte" in str(e.value) or "'" in str(e.value)   # an offset or a key/name


def test_crafted_valid_file_matches_gguf_py(tmp_path):
    "The hand-crafted builder itself is right: gguf-py reads its valid output the same way."
    data = build_gguf([gguf_kv("k.x", 4, U32(9)), gguf_kv("k.s", 8, gguf_string("hi"))],
                      [gguf_tensor_info("w", [8], 0, 0)], F32_ROW)
    assert_same_as_gguf_py(_file(tmp_path, data))


def test_one_type_table():
    "quant.GGML_TYPES (by id, for the reader and inspect) is chapter 02's DType table itself."
    from tffedu.quant import GGML_BY_NAME, GGML_TYPES
    from tffedu.tensor import DTYPES
    import tffedu.ops.cuda_quant  # noqa: F401  (adds the GPU's own layouts to DTYPES: never a file's)
    assert GGML_BY_NAME is DTYPES
    assert {d.ggml_id: d for d in DTYPES.values() if d.in_files} == GGML_TYPES
    assert all(GGML_TYPES[d.ggml_id] is d for d in DTYPES.values() if d.in_files)
    from tffedu.tensor import dtype_from_ggml
    for d in DTYPES.values():
        if not d.in_files:                # a file that names a GPU layout's id is refused
            assert d.ggml_id not in GGML_TYPES
            with pytest.raises(ShapeError):
                dtype_from_ggml(d.ggml_id)


def test_tensor_is_a_zero_copy_view(tmp_path):
    rng = np.random.default_rng(3)
    w = rng.standard_normal((4, 64)).astype(np.float32)
    q = random_blocks("Q8_0", 8, rng).reshape(4, -1)
    path = write_gguf(tmp_path / "z.gguf", {}, {"w": w, "q": (q, "Q8_0")})
    with GGUFFile(path) as f:
        t = f.tensor("w")
        assert tuple(t.shape) == (4, 64) and t.dtype.name == "F32"
        assert np.array_equal(t.numpy(), w) and np.shares_memory(t.numpy(), f.raw("w"))
        tq = f.tensor("q")
        assert tuple(tq.shape) == (4, 64) and tq.dtype.name == "Q8_0"
        assert np.array_equal(np.asarray(tq.numpy()).reshape(-1), q.reshape(-1))
        del t, tq


def test_missing_file(tmp_path):
    with pytest.raises(GGUFError, match="cannot open"):
        GGUFFile(tmp_path / "nope.gguf")


def test_inspect_report_matches_gguf_py():
    "The `tffedu inspect` text names every key and tensor, with gguf-py's types, shapes and sizes."
    from tffedu.modelfile import inspect_model
    path, ref = smollm2_reader()
    text = inspect_model(path)
    lines = text.splitlines()
    for k in ref.fields:
        if not k.startswith("GGUF."):
            assert any(line.split()[:1] == [k] for line in lines), k
    for t in ref.tensors:
        row = next(line.split() for line in lines if line.split()[:1] == [t.name])
        shape = list(reversed([int(x) for x in t.shape]))
        assert row[1] == t.tensor_type.name and row[-1] == f"{t.n_bytes:,}", t.name
        assert " ".join(row[2:-1]) == str(shape), t.name
    total = next(line for line in lines if line.strip().startswith("all "))
    assert f"{len(ref.tensors)} tensors" in " ".join(total.split())
    assert f"{sum(t.n_elements for t in ref.tensors):,} weights" in total
    assert "tied_embeddings  True" in text


def test_inspect_lists_tensors_in_block_order(tmp_path):
    "blk.2 before blk.10 in the report, whatever order the file (or a text sort) has them in."
    import re
    from tffedu.modelfile import inspect_model
    names = [f"blk.{i}.attn_q.weight" for i in (10, 2, 0, 11, 1)] + ["output.weight", "blk.3.ffn.weight"]
    path = write_gguf(tmp_path / "o.gguf", {}, {n: np.zeros(32, np.float32) for n in names})
    listed = [line.split()[0] for line in inspect_model(path).splitlines() if line.startswith("  blk.")]
    blocks = [int(re.match(r"blk\.(\d+)", n).group(1)) for n in listed]
    assert blocks == sorted(blocks) == [0, 1, 2, 3, 10, 11]


def test_inspect_cli(tmp_path):
    "`tffedu inspect` prints the report (the CLI itself is wired in tffedu/cli.py)."
    import subprocess, sys
    path = write_gguf(tmp_path / "c.gguf", {"k.x": 5}, {"w": np.zeros((2, 32), np.float32)})
    out = subprocess.run([sys.executable, "-m", "tffedu.cli", "inspect", str(path)],
                         capture_output=True, text=True, timeout=120)
    if "No module named tffedu.cli" in out.stderr:
        pytest.skip("tffedu.cli not present")
    assert out.returncode == 0, out.stderr
    assert "k.x" in out.stdout and "w " in out.stdout and "[2, 32]" in out.stdout
