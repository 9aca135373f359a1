"""Chapter 03c exercises: a safetensors header and one tensor, by hand. Files are written by the
safetensors package (torch), which is also the reference reader."""
import numpy as np
import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file


@pytest.fixture(scope="module")
def st_file(tmp_path_factory):
    g = torch.Generator().manual_seed(0)
    tensors = {"model.embed_tokens.weight": torch.randn(96, 64, generator=g).to(torch.bfloat16),
               "model.norm.weight": torch.randn(64, generator=g),
               "lm_head.weight": torch.randn(96, 64, generator=g).half(),
               "model.layers.0.mlp.up_proj.weight": torch.randn(80, 64, generator=g).to(torch.bfloat16)}
    path = tmp_path_factory.mktemp("st") / "model.safetensors"
    save_file(tensors, str(path), metadata={"format": "pt"})
    return path


def test_ch03c_1_read_header(impl, st_file):
    header = impl.read_header(st_file)
    with safe_open(str(st_file), "pt") as f:
        assert sorted(header) == sorted(f.keys())
        for name in f.keys():
            sl = f.get_slice(name)
            assert header[name]["shape"] == list(sl.get_shape()) and header[name]["dtype"] == sl.get_dtype()


def test_ch03c_2_load_tensor(impl, st_file):
    with safe_open(str(st_file), "pt") as f:
        for name in f.keys():
            ref = f.get_tensor(name).float().numpy()
            got = np.asarray(impl.load_tensor(st_file, name))
            assert got.dtype == np.float32 and got.shape == ref.shape, name
            np.testing.assert_array_equal(got, ref, err_msg=name)


def _from_file_start(path, name):            # offsets counted from byte 0, not from the header's end
    import json, struct
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        info = json.loads(f.read(n))[name]
        f.seek(info["data_offsets"][0])
        raw = f.read(info["data_offsets"][1] - info["data_offsets"][0])
    dt = {"F32": np.float32, "F16": np.float16, "BF16": np.float16}[info["dtype"]]
    return np.frombuffer(raw, dt).astype(np.float32).reshape(info["shape"])


def _keeps_metadata(path):
    import json, struct
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(n))


WRONG = {"test_ch03c_1_read_header": {"keeps-metadata": {"read_header": _keeps_metadata}},
         "test_ch03c_2_load_tensor": {"offsets-from-0": {"load_tensor": _from_file_start}}}
