"""Files made by llama.cpp's own `llama-quantize` (issue 36), the way a user gets them: random Qwen3
and Llama models written in F32 (tests/hf_models.py), requantized by llama-quantize to the file types
people download, read by tffedu on the CPU and on the GPU, against HF float32 holding the weights the
file holds (gguf-py's dequantization of each tensor: `read_gguf_weights`). Our own quantizers'
files are checked the same way in test_qwen3_hf.py and test_gpu_model.py; this is the outside oracle.

Needs the binary: TFFEDU_LLAMA_QUANTIZE=PATH (or llama-quantize on PATH), else skipped.

    TFFEDU_LLAMA_QUANTIZE=llama.cpp/build/bin/llama-quantize pytest -s tests/test_llama_quantize.py
"""
import collections
import os
import shutil
import subprocess

import numpy as np
import pytest

import tffedu
from hf_models import hf_logits, read_gguf_weights, rel_err, tiny_llama, tiny_qwen3, write_gguf

# name -> (HF model maker, llama.cpp file type); hidden and FFN sizes of whole 256-blocks take the
# K-quants, the last case's rows of 128 and 320 take llama-quantize's fallbacks
CASES = {
    "qwen3 h256 4/2 hd64 Q4_K_M": (lambda: tiny_qwen3(hidden=256, layers=3, heads=4, kv_heads=2, head_dim=64,
                                                      ffn=512, seed=30), "Q4_K_M"),
    "llama h256 4/1 untied Q4_K_M": (lambda: tiny_llama(hidden=256, layers=3, heads=4, kv_heads=1, ffn=768,
                                                        tied=False, seed=31), "Q4_K_M"),
    "qwen3 h256 2/1 hd128 tied Q5_K_M": (lambda: tiny_qwen3(hidden=256, heads=2, kv_heads=1, head_dim=128, ffn=512,
                                                            tied=True, seed=32), "Q5_K_M"),
    "llama h256 8/2 Q6_K": (lambda: tiny_llama(hidden=256, heads=8, kv_heads=2, ffn=512, seed=33), "Q6_K"),
    "qwen3 h256 4/2 hd64 Q4_0": (lambda: tiny_qwen3(hidden=256, heads=4, kv_heads=2, head_dim=64, ffn=512,
                                                    seed=34), "Q4_0"),
    "llama h128 8/1 fallbacks Q4_K_M": (lambda: tiny_llama(hidden=128, heads=8, kv_heads=1, ffn=320, seed=35),
                                        "Q4_K_M"),
}
IDS = np.random.default_rng(0).integers(0, 400, 60).tolist()


def _binary() -> str:
    path = os.environ.get("TFFEDU_LLAMA_QUANTIZE") or shutil.which("llama-quantize")
    if not path:
        pytest.skip("no llama-quantize: set TFFEDU_LLAMA_QUANTIZE to llama.cpp's binary")
    return path


@pytest.fixture(scope="module", params=list(CASES))
def case(request, tmp_path_factory):
    "(name, HF model holding the file's weights, path of the file llama-quantize wrote, its types)."
    binary = _binary()
    make, ftype = CASES[request.param]
    hf = make()
    d = tmp_path_factory.mktemp("llq")
    src, dst = write_gguf(hf, d / "f32.gguf", "F32"), d / f"{ftype}.gguf"
    run = subprocess.run([binary, str(src), str(dst), ftype], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    types = collections.Counter(read_gguf_weights(hf, dst).values())
    return request.param, hf, dst, types


def test_llama_quantize_files_match_hf_on_the_cpu(case):
    name, hf, path, types = case
    m = tffedu.load(path, n_ctx=256)
    for n in (1, 7, 60):
        err = rel_err(m.logits(IDS[:n]), hf_logits(hf, IDS[:n]))
        print(f"cpu  {name:34s} T={n:2d} rel err {err:.1e}  {dict(types)}")
        assert err < 1e-4


@pytest.mark.gpu
def test_llama_quantize_files_match_hf_on_cuda(case, capfd):
    name, hf, path, types = case
    m = tffedu.load(path, device="cuda", n_ctx=256)
    m.logits([1])
    assert "dequantized to F16" not in capfd.readouterr().err      # every type read as stored
    for n in (1, 7, 60):                           # GEMV rows, a small prefill, a GEMM prefill
        got, ref = m.logits(IDS[:n]), hf_logits(hf, IDS[:n])
        err = np.abs(got - ref).max() / np.abs(ref).max()
        agree = (got.argmax(-1) == ref.argmax(-1)).mean()
        print(f"cuda {name:34s} T={n:2d} rel err {err:.1e} argmax agreement {agree:.1%}")
        assert err < 3e-2
        gap = ref.max(-1) - ref[np.arange(n), got.argmax(-1)]     # where they differ: a near-tie
        assert np.all(gap <= 2 * err * np.abs(ref).max()), gap.max()
