"""Chapter 11: the table of weight types the GPU reads as stored (`GPU_WEIGHTS`).

The rows' block facts are checked against gguf-py's table of block sizes and their `get_rows`
kernels against the kernel sources. That a new type is one row is checked on the CPU: a made-up
type with launchers that only record their arguments joins the table, and the matmul ops, their
workspace and the fusion rules route it from the row alone (every real launcher raises if called).
"""
import re
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest

import gguf

from tffedu.errors import ShapeError
from tffedu.ops import cuda_matmul as cm

ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]


def test_rows_match_gguf_blocks():
    from tffedu.ops.cuda_quant import FILE_TYPES as file_of    # a GPU layout -> the file type it holds
    for name, row in cm.GPU_WEIGHTS.items():
        assert row.name == name
        qk, nbytes = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[file_of.get(name, name)]]
        gpu_bytes = 216 if file_of.get(name) == "Q6_K" else 8 * nbytes             # Q6_K padded, or eight blocks
        assert (row.block, row.block_bytes) == ((256, gpu_bytes) if name in file_of else (qk, nbytes)), name
        assert row.prefill is not None


def test_get_rows_kernels_exist():
    from tffedu.factory import OPS
    OPS.load_backend("cuda")                                   # every chapter's rows
    for name, row in cm.GPU_WEIGHTS.items():
        file, kernel, defines = row.get_rows
        src = (ROOT / "kernels" / file).read_text()
        assert kernel in re.findall(r'extern "C" __global__ void (\w+)\s*\(', src), f"{name}: {kernel} not in {file}"
        assert defines is None or set(defines) <= set(re.findall(r"#ifndef (\w+)", src)), name


def test_import_needs_no_pycuda():
    code = "import sys; sys.modules['pycuda'] = None; import tffedu.ops.cuda_matmul as m; print(len(m.GPU_WEIGHTS))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr


# ------------------------------------------------------------------ a made-up type, one row
BLOCK, BLOCK_BYTES, GEMV_ROWS = 64, 40, 4


def dev(shape, dtype, addr):
    "A stand-in for a device array (what the ops read: shape, dtype, address, size)."
    dt = np.dtype(dtype)
    return SimpleNamespace(shape=tuple(shape), dtype=dt, gpudata=addr, nbytes=int(np.prod(shape)) * dt.itemsize)


def node(shape, dtype):
    "A stand-in for a graph node (what the workspace planner reads)."
    return SimpleNamespace(shape=tuple(shape), dtype=SimpleNamespace(name=dtype))


@pytest.fixture
def toy(monkeypatch):
    calls = []

    def launcher(path):
        def run(xp, xk, wp, wk, yp, T, N, K, ws, stream=None, **epilogue):
            calls.append(dict(path=path, xp=xp, xk=xk, wp=wp, wk=wk, yp=yp, T=T, N=N, K=K, epilogue=epilogue,
                              scratch=None if ws is None else ws.end - ws.base))
        return run

    def forbidden(name):
        def f(*a, **k):
            raise AssertionError(f"{name} ran for the made-up type")
        return f

    for name in ("q8_0_gemv", "q8_gemm", "q8_0_slab_gemm", "sgemm", "gemm16", "cast_raw", "pad_cols", "_drv"):
        monkeypatch.setattr(cm, name, forbidden(name))
    monkeypatch.setattr(cm, "add", lambda a, b, out, stream=None: calls.append(dict(path="add")))
    gemv = cm.MatmulPath(launcher("gemv"), lambda T, K, N, xk, wk, ep=None: [T * K, T * 8],
                         max_rows=GEMV_ROWS, fuses=True, packed_i8=True)
    gemm = cm.MatmulPath(launcher("gemm"), lambda T, K, N, xk, wk, ep=None: [T * K * 2, N * K * 2 + (ep == "res")])
    monkeypatch.setitem(cm.GPU_WEIGHTS, "TOY4", cm.GpuWeight("TOY4", BLOCK, BLOCK_BYTES, gemm, gemv))
    return calls


N, K = 3, 256
W = dev((N, K // BLOCK * BLOCK_BYTES), np.uint8, 1 << 32)
WS = dev((1 << 20,), np.int8, 1 << 33)


def test_toy_shape_from_its_block(toy):
    assert cm._w_info(W, "TOY4") == ("TOY4", N, K)
    with pytest.raises(ShapeError, match="multiple of 40 bytes"):
        cm._w_info(dev((N, 41), np.uint8, 0), "TOY4")
    with pytest.raises(ShapeError, match="TOY4") as e:
        cm._w_info(W, "NOPE")
    assert all(n in str(e.value) for n in cm.GPU_WEIGHTS)


@pytest.mark.parametrize("T", [1, GEMV_ROWS, GEMV_ROWS + 1, 300])
def test_toy_matmul_routes_by_its_row(toy, T):
    x, y = dev((T, K), np.float32, 1 << 34), dev((T, N), np.float32, 1 << 35)
    cm.OPS.get("matmul", "cuda")(x, W, out=y, workspace=WS, w_dtype="TOY4")
    want = "gemv" if T <= GEMV_ROWS else "gemm"
    pieces = [T * K, T * 8] if want == "gemv" else [T * K * 2, N * K * 2]
    assert toy == [dict(path=want, xp=1 << 34, xk="F32", wp=1 << 32, wk="TOY4", yp=1 << 35, T=T, N=N, K=K,
                        epilogue={}, scratch=cm.workspace_bytes(*pieces))]
    planned = cm.matmul.workspace(node((T, K), "F32"), node((N, K), "TOY4"))
    assert planned == cm.workspace_bytes(*pieces)
    assert cm.fuses_epilogue("TOY4", T, K) == (want == "gemv")
    assert cm.reads_packed_i8("TOY4", T, K) == (want == "gemv")


@pytest.mark.parametrize("T", [2, GEMV_ROWS + 1])
def test_toy_epilogue_where_its_path_fuses(toy, T):
    x, r, y = dev((T, K), np.float16, 1 << 34), dev((T, N), np.float32, 1 << 36), dev((T, N), np.float32, 1 << 35)
    cm.matmul_add(x, W, r, out=y, workspace=WS, w_dtype="TOY4")
    if T <= GEMV_ROWS:                      # the GEMV adds the residual itself
        assert [c["path"] for c in toy] == ["gemv"] and toy[0]["epilogue"] == {"res": 1 << 36}
        assert toy[0]["scratch"] == cm.workspace_bytes(T * K, T * 8)
    else:                                   # the GEMM does not: the add follows it
        assert [c["path"] for c in toy] == ["gemm", "add"] and toy[0]["epilogue"] == {}
        assert toy[0]["scratch"] == cm.workspace_bytes(T * K * 2, N * K * 2 + 1)   # sized for "res"
    toy.clear()
    w2 = dev(W.shape, np.uint8, 1 << 37)
    cm.matmul_cat(x, W, w2, out=dev((T * 2 * N,), np.float32, 1 << 35), workspace=WS, w_dtype="TOY4")
    if T <= GEMV_ROWS:
        assert [c["path"] for c in toy] == ["gemv"] and toy[0]["epilogue"] == {"cat": [(1 << 37, N)]}
    else:
        assert [(c["path"], c["wp"], c["yp"]) for c in toy] == [("gemm", 1 << 32, 1 << 35),
                                                               ("gemm", 1 << 37, (1 << 35) + 4 * T * N)]


def test_toy_packed_activations(toy, monkeypatch):
    T = 2
    xq = dev((T, K + K // 8), np.int8, 1 << 34)
    cm.matmul_q8(xq, W, out=dev((T, N), np.float32, 1 << 35), w_dtype="TOY4")
    assert [(c["path"], c["xk"], c["scratch"]) for c in toy] == [("gemv", "I8", None)]
    with pytest.raises(ShapeError, match=f"TOY4 weights at T <= {GEMV_ROWS}"):
        cm.matmul_q8(dev((GEMV_ROWS + 1, K + K // 8), np.int8, 1 << 34), W,
                     out=dev((GEMV_ROWS + 1, N), np.float32, 1 << 35), w_dtype="TOY4")
    row = cm.GPU_WEIGHTS["TOY4"]
    monkeypatch.setitem(cm.GPU_WEIGHTS, "TOY4", cm.GpuWeight(
        "TOY4", BLOCK, BLOCK_BYTES, row.prefill, cm.MatmulPath(row.gemv.run, row.gemv.pieces, max_rows=GEMV_ROWS)))
    assert not cm.reads_packed_i8("TOY4", T, K)
    with pytest.raises(ShapeError, match="packed int8 activations feed Q8_0 weights at T <= 8, .*got TOY4"):
        cm.matmul_q8(xq, W, out=dev((T, N), np.float32, 1 << 35), w_dtype="TOY4")


def test_toy_unknown_to_the_rules_without_its_row():
    assert "TOY4" not in cm.GPU_WEIGHTS
    assert not cm.fuses_epilogue("TOY4", 1, K) and not cm.reads_packed_i8("TOY4", 1, K)
    with pytest.raises(ShapeError, match="matmul on cuda supports Q8_0"):
        cm._matmul_pieces(1, K, N, "F32", "TOY4")


@pytest.mark.gpu
def test_get_rows_kernels_load():
    from tffedu.ops.cuda import kernel
    for row in cm.GPU_WEIGHTS.values():
        file, name, defines = row.get_rows
        assert kernel(file, name, "PPPii", defines) is not None
