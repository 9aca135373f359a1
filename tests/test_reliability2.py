"""Reliability, round two (issue 33), the classes a hostile user found after round one: metadata of
millions of tiny values, overlapping tensor data, a quadratic template filter, files that cannot be
read, token ids that are not integers, n_ctx=0, a cache path through a file or a symlink loop, K/V
pages the host cannot hold, logits that must wait for pages, and the CLI with stdin or stdout
closed. Each ends in a TffeduError naming the problem (or the right answer), quickly."""
import os
import struct
import subprocess
import sys
import time

import numpy as np
import pytest

import tffedu
from tffedu.errors import (AllocationError, GGUFError, ModelCacheError, ModelError, TffeduError,
                           TokenizerError)
from tffedu.gguf import MAX_METADATA_VALUES, GGUFFile, ValueType as V
from gguf_util import build_gguf, gguf_kv, gguf_tensor_info
from hf_models import tiny_qwen3, write_gguf

QUICK = 5.0     # seconds: the refusals below take milliseconds; the bound only catches a parse


def refused_quickly(path, match):
    t0 = time.perf_counter()
    with pytest.raises(GGUFError, match=match):
        GGUFFile(path)
    assert time.perf_counter() - t0 < QUICK


# --- metadata: counted in values, not only in bytes ----------------------------------------------
@pytest.mark.parametrize("n", [MAX_METADATA_VALUES + 1, 4_000_000])
def test_millions_of_empty_nested_arrays_are_refused_before_parsing(tmp_path, n):
    empty = struct.pack("<IQ", V.UINT8, 0)                       # an empty array: 12 bytes
    payload = struct.pack("<IQ", V.ARRAY, n) + empty * n
    (tmp_path / "m.gguf").write_bytes(build_gguf([gguf_kv("x.junk", V.ARRAY, payload)]))
    refused_quickly(tmp_path / "m.gguf", "more than .* values")


def test_millions_of_empty_strings_are_refused_before_parsing(tmp_path):
    n = 3_000_000
    payload = struct.pack("<IQ", V.STRING, n) + b"\0" * 8 * n    # n empty strings
    (tmp_path / "m.gguf").write_bytes(build_gguf([gguf_kv("x.junk", V.ARRAY, payload)]))
    refused_quickly(tmp_path / "m.gguf", "more than .* values")


def test_millions_of_keys_are_refused_before_parsing(tmp_path):
    n = MAX_METADATA_VALUES + 10
    kvs = [gguf_kv(f"k{i}", V.UINT8, b"\0") for i in range(16)]   # the header claims many more
    data = build_gguf(kvs)
    data = data[:4 + 4 + 8] + struct.pack("<Q", n) + data[24:] + b"\0" * (n * 13)
    (tmp_path / "m.gguf").write_bytes(data)
    refused_quickly(tmp_path / "m.gguf", "kv_count")


def test_a_real_vocabulary_is_far_under_the_count(tmp_path):
    "The budget leaves room: Qwen2's vocabulary file (151k tokens + 151k merges) is read."
    from conftest import DATA
    with GGUFFile(DATA / "ggml-vocab-qwen2.gguf") as f:
        n = len(f.metadata["tokenizer.ggml.tokens"]) + len(f.metadata["tokenizer.ggml.merges"])
    assert n < MAX_METADATA_VALUES / 4


def test_overlapping_tensor_data_is_refused(tmp_path):
    a = gguf_tensor_info("a.weight", (32, 2), 0, 0)               # F32 [2, 32]: 256 bytes at 0
    b = gguf_tensor_info("b.weight", (32, 2), 0, 128)             # starts inside a
    (tmp_path / "m.gguf").write_bytes(build_gguf(infos=[a, b], data=b"\0" * 512))
    refused_quickly(tmp_path / "m.gguf", "'a.weight' and 'b.weight' overlap")
    c = gguf_tensor_info("b.weight", (32, 2), 0, 256)             # right after: fine
    (tmp_path / "ok.gguf").write_bytes(build_gguf(infos=[a, c], data=b"\0" * 512))
    with GGUFFile(tmp_path / "ok.gguf") as f:
        assert set(f.tensors) == {"a.weight", "b.weight"}


# --- files that cannot be read, and caches that cannot be used -------------------------------------
@pytest.mark.skipif(not os.path.exists("/proc/self/mem"), reason="Linux's /proc")
def test_a_regular_file_that_cannot_be_read():
    with pytest.raises(GGUFError, match="cannot read"):
        tffedu.load("/proc/self/mem")


@pytest.mark.parametrize("kind", ["file", "loop"])
def test_a_cache_path_through_a_file_or_a_symlink_loop(tmp_path, monkeypatch, kind):
    import tffedu.assets as assets
    if kind == "file":
        (tmp_path / "afile").write_text("x")
        root = tmp_path / "afile" / "cache"
    else:
        os.symlink(tmp_path / "b", tmp_path / "a")
        os.symlink(tmp_path / "a", tmp_path / "b")
        root = tmp_path / "a" / "cache"
    monkeypatch.setenv("TFFEDU_CACHE", str(root))
    monkeypatch.setattr(assets, "_download_wheel", lambda *a: pytest.fail("must not download"))
    with pytest.raises(ModelCacheError, match="TFFEDU_CACHE"):
        assets.default_model_path(quiet=True)


@pytest.mark.parametrize("path", [5, 2.5, ["m.gguf"], object(), None])
def test_a_path_that_is_not_a_path_is_named(path):
    "load(5) is not file descriptor 5, nor a TypeError: a GGUFError that says what a path is."
    from tffedu.modelfile import detect_format
    for call in (tffedu.load_tokenizer, GGUFFile, detect_format) + ((tffedu.load,) if path is not None else ()):
        with pytest.raises(GGUFError, match="path is a str or os.PathLike, got " + type(path).__name__):
            call(path)


# --- the tokenizer: token ids are integers ---------------------------------------------------------
@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return tffedu.load(write_gguf(tiny_qwen3(seed=7), tmp_path_factory.mktemp("r2") / "m.gguf"), n_ctx=256)


@pytest.mark.parametrize("ids", [None, "123", b"12", 5, [1.5], [True], [None], ["1"], np.array([1.0]),
                                 {1: 2}, [[1]]])
def test_decode_takes_integers_only(model, ids):
    with pytest.raises(TokenizerError, match="token id"):
        model.tokenizer.decode(ids)


@pytest.mark.parametrize("t", [1.0, True, "1", None, [1], np.float32(2)])
def test_stream_decoder_takes_integers_only(model, t):
    with pytest.raises(TokenizerError, match="token id"):
        model.tokenizer.stream_decoder().push(t)


def test_integer_ids_of_any_kind_still_decode(model):
    tok = model.tokenizer
    ref = tok.decode([10, 20, 30])
    assert tok.decode(np.array([10, 20, 30], np.int64)) == tok.decode((10, 20, 30)) == ref
    assert tok.decode([np.int32(10), 20, np.uint16(30)]) == ref


# --- the template sandbox: a quadratic sum inside one C call ---------------------------------------
def test_sum_of_lists_is_linear_and_still_jinjas_sum():
    import jinja2
    from tffedu.tokenizer import render_chat_template
    msgs = [{"role": "user", "content": "x"}]
    small = ("{{ ([[1, 2], [3]])|sum(start=[]) }} {{ [1, 2, 3]|sum }} {{ [(1,), (2,)]|sum(start=()) }}"
             " {{ [{'a': [1]}, {'a': [2]}]|sum(attribute='a', start=[]) }} {{ [0.5, 1]|sum(start=1) }}")
    assert render_chat_template(small, msgs) == jinja2.Environment().from_string(small).render()
    t0 = time.perf_counter()
    out = render_chat_template("{{ ([[0]] * 50000)|sum(start=[])|length }}", msgs)
    assert out == "50000" and time.perf_counter() - t0 < QUICK      # quadratic: seconds, in one C call
    with pytest.raises(TokenizerError, match="sum filter"):
        render_chat_template("{% set a = [[0] * 300] * 1000 %}{% set b = a + a + a + a %}"   # 4,000 refs
                             "{{ (b + b + b + b)|sum(start=[])|length }}", msgs)          # 4.8M elements
    with pytest.raises(TokenizerError):                            # what Python's sum says
        render_chat_template("{{ [[1], 'a']|sum(start=[]) }}", msgs)


# --- the API -----------------------------------------------------------------------------------------
def test_n_ctx_zero_is_not_unset(model, tmp_path):
    with pytest.raises(ModelError, match="n_ctx"):
        tffedu.load(model.source.path, n_ctx=0)


def test_logits_wait_for_pages_like_generate(model):
    from tffedu.engine import Engine
    eng = Engine(model, page_size=4, num_pages=20)
    model._engine = eng                                 # the engine model.logits uses
    try:
        r = eng.add(list(range(1, 60)), max_new_tokens=6, ignore_eos=True)   # 15 of the 20 pages
        eng.step()
        assert eng.cache.n_free_pages < 8
        got = model.logits(list(range(1, 30)))          # 8 pages: waits until r is done
        assert r.done and eng.cache.n_free_pages == 20
        np.testing.assert_array_equal(got, model.logits(list(range(1, 30))))
        with pytest.raises(TffeduError, match="pages"):
            model.logits(list(range(1, 90)))            # 23 pages: more than the cache has
    finally:
        del model._engine


def test_kv_pages_the_host_cannot_hold_are_an_allocation_error(model, monkeypatch):
    import tffedu.runner
    from tffedu.engine import Engine
    real = np.zeros

    def zeros(shape, *a, **kw):                         # as numpy does when calloc fails
        if int(np.prod(shape)) > 10**8:
            raise MemoryError(f"Unable to allocate array with shape {shape}")
        return real(shape, *a, **kw)
    monkeypatch.setattr(tffedu.runner.np, "zeros", zeros)
    with pytest.raises(AllocationError, match="K/V pages"):
        Engine(model, num_pages=(1 << 24) // 32)


# --- the command line with stdin or stdout closed ---------------------------------------------------
@pytest.mark.parametrize("cmd,redirect,what", [
    ("chat -n 2", "<&-", "stdin is closed"),
    ("generate -p hi -n 2", ">&-", "stdout is closed"),
    ("bench -p 4 -n 2", ">&-", "stdout is closed"),
    ("serve --port 0", ">&-", "stdout is closed"),            # uvicorn's access log goes there
])
def test_cli_with_a_standard_stream_closed(model, cmd, redirect, what):
    line = f"{sys.executable} -m tffedu.cli {cmd} -m {model.source.path} {redirect}"
    p = subprocess.run(line, shell=True, capture_output=True, text=True, timeout=120)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 1 and len(lines) == 1 and lines[0].startswith(f"tffedu: error: {what}"), p.stderr


def test_inspect_with_stdout_closed_and_an_odd_architecture(model, tmp_path):
    from gguf_build import build, read_model
    meta, types, tensors = read_model(model.source.path)
    bad = tmp_path / "arch.gguf"
    bad.write_bytes(build({**meta, "general.architecture": np.array([1, 2], np.int32)},
                          {**types, "general.architecture": V.ARRAY}, tensors))
    p = subprocess.run([sys.executable, "-m", "tffedu.cli", "inspect", str(bad)], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode in (0, 1) and "internal error" not in p.stderr, p.stderr
    p = subprocess.run(f"{sys.executable} -m tffedu.cli inspect {bad} >&-", shell=True, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 1 and "stdout is closed" in p.stderr


# --- streams whose consumer went away -----------------------------------------------------------------
def test_an_abandoned_stream_stops_computing_and_gives_its_pages_back(model):
    """A stream whose consumer stopped reading (its frame kept alive, as IPython keeps the last
    exception's) is parked STREAM_LOOKAHEAD tokens ahead: other callers' steps no longer compute for
    it, its pages go to a request that needs them, and if its consumer comes back it still gives
    exactly what generate gives."""
    from tffedu.engine import STREAM_LOOKAHEAD, Engine
    prompt, other = list(range(1, 20)), list(range(3, 63))
    want = model.generate(prompt, max_new_tokens=40, ignore_eos=True).text
    want_other = model.generate(other, max_new_tokens=10, ignore_eos=True).tokens
    eng = Engine(model, page_size=4, num_pages=22)       # 88 tokens: not enough for both at once
    saved, model._engine = getattr(model, "_engine", None), eng
    try:
        s = model.stream(prompt, max_new_tokens=40, ignore_eos=True)
        first = next(s)                                   # then the consumer goes quiet
        (orphan,) = eng.scheduler.running
        assert model.generate([5, 6, 7], max_new_tokens=30, ignore_eos=True).tokens   # others' steps
        assert orphan.parked and orphan.n_generated <= STREAM_LOOKAHEAD + 1
        assert not eng.busy                               # a parked stream is not work to step
        assert model.generate(other, max_new_tokens=10, ignore_eos=True).tokens == want_other
        assert orphan not in eng.scheduler.running        # its pages were taken back
        assert first + "".join(s) == want                 # and it resumes, exactly
    finally:
        model._engine = saved


# --- a model file that changes under its map (chapter 03: map_file / check_unchanged) ------------

CHANGE = """
import os, sys, time
import tffedu
from tffedu.errors import TffeduError
path, how = sys.argv[1], sys.argv[2]
m = tffedu.load(path, n_ctx=64)
first = m.generate([5, 6, 7], max_new_tokens=4).tokens
target = path if os.path.isfile(path) else os.path.join(path, "model.safetensors")
size = os.path.getsize(target)
if how == "truncate":
    os.truncate(target, size // 2)
elif how == "overwrite":                   # same size, other bytes, a later modification time
    with open(target, "r+b") as f:
        f.seek(size - 4096)
        f.write(os.urandom(4096))
    os.utime(target, ns=(time.time_ns(), time.time_ns() + 10**9))
elif how == "replace":                     # a new file renamed over the old: ours is untouched
    with open(target + ".new", "wb") as f:
        f.write(b"not a model")
    os.replace(target + ".new", target)
try:
    again = m.generate([5, 6, 7], max_new_tokens=4).tokens
    print("same" if again == first else "different")
except TffeduError as e:
    print(type(e).__name__, e)
"""


def changed_under_the_map(path, how):
    "Run the scenario in a child: a SIGBUS there is a failed test, not a dead test run."
    r = subprocess.run([sys.executable, "-c", CHANGE, str(path), how], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, f"the process died ({r.returncode}): {r.stderr[-500:]}"
    return r.stdout.strip()


@pytest.fixture(scope="module")
def tiny_files(tmp_path_factory):
    hf = tiny_qwen3(seed=3)
    return hf, tmp_path_factory.mktemp("change")


@pytest.mark.parametrize("how", ["truncate", "overwrite"])
def test_a_gguf_changed_under_the_map_is_an_error_not_a_crash(tiny_files, how):
    hf, d = tiny_files
    out = changed_under_the_map(write_gguf(hf, d / f"{how}.gguf", "F32"), how)
    assert out.startswith("GGUFError") and "changed on disk since it was opened" in out, out


def test_a_gguf_replaced_by_rename_keeps_generating(tiny_files):
    hf, d = tiny_files
    assert changed_under_the_map(write_gguf(hf, d / "replace.gguf", "F32"), "replace") == "same"


def test_an_hf_folder_truncated_under_the_map_is_an_error(tiny_files):
    hf, d = tiny_files
    folder = d / "hf"
    hf.save_pretrained(folder, safe_serialization=True)
    out = changed_under_the_map(folder, "truncate")
    assert out.startswith("SafetensorsError") and "changed on disk" in out, out
