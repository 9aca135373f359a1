"""Every `tffedu` subcommand, given each kind of malformed input, prints one line on stderr and exits
non-zero (issue 10; the public contract). In-process through `cli.main` for speed; through a real process
where it matters (undecodable argv bytes, a FIFO that must not block, non-UTF-8 stdin)."""
import io
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from gguf_build import build, read_model
from hf_models import tiny_qwen3, write_gguf
from tests.conftest import DATA
from tffedu import cli
from tffedu.gguf import ValueType as V

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    "A tiny valid model, and one malformed model input of every kind next to it."
    d = tmp_path_factory.mktemp("cli_inputs")
    good = write_gguf(tiny_qwen3(seed=3), d / "tiny.gguf")
    meta, types, tensors = read_model(good)
    raw = good.read_bytes()
    out = {"good": good}

    def put(name, data):
        (d / name).write_bytes(data)
        out[name] = d / name

    put("empty.gguf", b"")
    put("text.gguf", b"just some text, not a model\n")
    put("truncated.gguf", raw[: len(raw) // 2])
    put("header-only.gguf", raw[:24])
    put("absurd-counts.gguf", b"GGUF\x03\x00\x00\x00" + b"\xff" * 40)
    put("block-count-1000.gguf", build({**meta, "qwen3.block_count": 1000}, types, tensors))
    put("head-count-0.gguf", build({**meta, "qwen3.attention.head_count": 0}, types, tensors))
    put("ffn-2^32-1.gguf", build({**meta, "qwen3.feed_forward_length": 2**32 - 1}, types, tensors))
    put("merges-as-ints.gguf", build({**meta, "tokenizer.ggml.merges": np.arange(5, dtype=np.int32)},
                                     types, tensors))
    put("bos-as-string.gguf", build({**meta, "tokenizer.ggml.bos_token_id": "1"},
                                    {**types, "tokenizer.ggml.bos_token_id": V.STRING}, tensors))
    put("no-ffn-up.gguf", build(meta, types, {k: v for k, v in tensors.items() if k != "blk.1.ffn_up.weight"}))
    t, shape, data = tensors["blk.0.attn_q.weight"]
    put("q-wrong-shape.gguf", build(meta, types, {**tensors, "blk.0.attn_q.weight": (t, (shape[0] // 2, shape[1]),
                                                                                     data[: len(data) // 2])}))
    (d / "folder").mkdir()
    out["folder"] = d / "folder"
    hf = d / "hf-list-config"
    hf.mkdir()
    (hf / "config.json").write_text(json.dumps([{"model_type": "qwen3"}]))
    out["hf-list-config"] = hf
    os.mkfifo(d / "pipe.gguf")
    out["pipe.gguf"] = d / "pipe.gguf"
    out["missing.gguf"] = d / "missing.gguf"
    out["/dev/null"] = "/dev/null"
    return out


MODEL_INPUTS = ["empty.gguf", "text.gguf", "truncated.gguf", "header-only.gguf", "absurd-counts.gguf",
                "block-count-1000.gguf", "head-count-0.gguf", "ffn-2^32-1.gguf", "no-ffn-up.gguf",
                "q-wrong-shape.gguf", "folder", "hf-list-config", "pipe.gguf", "missing.gguf", "/dev/null"]
TOKENIZER_INPUTS = ["merges-as-ints.gguf", "bos-as-string.gguf"]   # weights fine, tokenizer not


def run_main(capsys, monkeypatch, argv, stdin=b""):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"))
    try:
        code = cli.main([str(a) for a in argv])
    except SystemExit as e:          # argparse errors exit through SystemExit
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(code, err):
    lines = err.strip().splitlines()
    assert code not in (0, None), err
    assert len(lines) == 1 and lines[0].startswith("tffedu: error:"), err
    return lines[0]


SUBCOMMANDS = {
    "generate": lambda m: ["generate", "-m", m, "-p", "hello", "-n", "2"],
    "chat": lambda m: ["chat", "-m", m, "-n", "2"],
    "inspect": lambda m: ["inspect", m],
    "bench": lambda m: ["bench", "-m", m, "-p", "4", "-n", "2"],
    "serve": lambda m: ["serve", "-m", m, "--port", "0"],     # fails while loading: never listens
}


@pytest.mark.parametrize("cmd", list(SUBCOMMANDS))
@pytest.mark.parametrize("name", MODEL_INPUTS)
def test_malformed_model_file(files, capsys, monkeypatch, cmd, name):
    code, out, err = run_main(capsys, monkeypatch, SUBCOMMANDS[cmd](files[name]), stdin=b"hi\n")
    line = one_line_error(code, err)
    assert code == 1 and "Traceback" not in err
    if cmd == "inspect" and out:        # a well-formed file that lies: the report, then the error
        assert "metadata:" in out and "config: not a model tffedu runs" in out
    else:
        assert out.strip() in ("", ">"), out
    if name not in ("/dev/null",):
        assert os.path.basename(str(files[name])) in line or "qwen3." in line or "config" in line, line


@pytest.mark.parametrize("cmd", ["generate", "chat"])
@pytest.mark.parametrize("name", TOKENIZER_INPUTS)
def test_malformed_tokenizer(files, capsys, monkeypatch, cmd, name):
    code, out, err = run_main(capsys, monkeypatch, SUBCOMMANDS[cmd](files[name]), stdin=b"hi\n")
    line = one_line_error(code, err)
    assert "tokenizer" in line, line


BAD_FLAGS = {
    "generate": [["-n", "0"], ["-n", "x"], ["-n", "-3"], ["-n", str(10**30)], ["--temp", "nan"],
                 ["--temp", "inf"], ["--temp", "-1"], ["--top-p", "0"], ["--top-p", "1.5"],
                 ["--top-p", "nan"], ["--top-k", "-1"], ["--seed", "-1"], ["--seed", "x"],
                 ["--seed", str(2**64)], ["--device", "tpu"], ["--nope"], ["-p", "a", "b"]],
    "chat": [["-n", "0"], ["--temp", "nan"], ["--seed", "x"], ["--device", "tpu"], ["--think", "x"]],
    "bench": [["-p", "x"], ["-n", "-1"], ["--device", "tpu"]],
    "inspect": [["a", "b"], ["--nope"]],
    "serve": [["--port", "70000"], ["--port", "x"], ["--port", "-1"], ["--max-batch", "0"],
              ["--max-queue", "-1"], ["--kv-tokens", "0"], ["--n-ctx", "0"], ["--device", "tpu"],
              ["--kv-memory", "0"], ["--kv-memory", "1.5"], ["--kv-memory", "nan"],
              ["--kv-memory", "0.5", "--kv-tokens", "4096"]],
}


@pytest.mark.parametrize("cmd, extra", [(c, e) for c, es in BAD_FLAGS.items() for e in es],
                         ids=lambda v: " ".join(v) if isinstance(v, list) else v)
def test_bad_flags(files, capsys, monkeypatch, cmd, extra):
    argv = [cmd] + ([] if cmd == "inspect" else ["-m", files["good"]]) + extra
    code, out, err = run_main(capsys, monkeypatch, argv)
    one_line_error(code, err)
    assert code == 2 and out == ""


def test_flag_values_take_any_case(files, capsys, monkeypatch):
    "--device CPU and --kv-dtype f32 are --device cpu and --kv-dtype F32, as load() takes them."
    code, out, err = run_main(capsys, monkeypatch, SUBCOMMANDS["generate"](files["good"]) + ["--device", "CPU",
                                                                                             "--kv-dtype", "f32"])
    assert code in (0, None) and out and "error" not in err, err


def test_no_subcommand(capsys, monkeypatch):
    code, _, err = run_main(capsys, monkeypatch, [])
    assert code == 2 and "(see tffedu -h)" in one_line_error(code, err)


def test_inspect_still_reads_vocabulary_only_files(capsys, monkeypatch):
    "Not malformed: inspect reports a file tffedu cannot run, and says why."
    code, out, err = run_main(capsys, monkeypatch, ["inspect", DATA / "ggml-vocab-qwen2.gguf"])
    assert code == 0 and "config: not a model tffedu runs" in out


def test_broken_pipe_is_quiet(files):
    p = subprocess.Popen([sys.executable, "-m", "tffedu.cli", "inspect", str(files["good"])],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    p.stdout.read(10)
    p.stdout.close()                  # like `| head -c 10`
    err = p.stderr.read().decode()
    assert p.wait(timeout=60) == 0 and err == ""


def cli_process(*args, stdin=b"", timeout=120):
    return subprocess.run([sys.executable, "-m", "tffedu.cli", *args], input=stdin,
                          capture_output=True, timeout=timeout, cwd=ROOT)


def test_non_utf8_argv_bytes(files):
    "Undecodable bytes on the command line reach Python as lone surrogates: named, one line."
    r = cli_process(b"generate", b"-m", os.fsencode(files["good"]), b"-p", b"caf\xe9 \xff")
    err = r.stderr.decode()
    assert r.returncode == 2 and len(err.strip().splitlines()) == 1, err
    assert "the prompt (-p) is not valid UTF-8 (byte 0xE9 at character 3)" in err
    r = cli_process(b"chat", b"-m", os.fsencode(files["good"]), b"--system", b"\x80")
    assert r.returncode == 2 and "--system is not valid UTF-8 (byte 0x80" in r.stderr.decode()


def test_non_utf8_model_path_is_just_a_path(files, tmp_path):
    "A file name may be any bytes on POSIX: it is opened as it is, and named in the error."
    bad = os.path.join(os.fsencode(tmp_path), b"mod\xffel.gguf")
    with open(bad, "wb") as f:
        f.write(b"not a model")
    r = cli_process(b"inspect", bad)
    err = r.stderr.decode("utf-8", "replace")
    assert r.returncode == 1 and len(err.strip().splitlines()) == 1 and "unknown model format" in err


def test_non_utf8_chat_stdin(files):
    r = cli_process("chat", "-m", str(files["good"]), "-n", "2", stdin=b"hello\n\xff\xfe\n")
    err = r.stderr.decode()
    lines = [l for l in err.strip().splitlines() if not l.startswith("tffedu chat:")]
    assert r.returncode == 1 and len(lines) == 1, err
    assert "stdin line 2 is not valid UTF-8 (byte 0xFF at offset 0)" in lines[0]


def test_fifo_as_model_does_not_block(files):
    "open() of a FIFO waits for a writer forever; tffedu refuses it without opening it blocking."
    for args in (["generate", "-m", str(files["pipe.gguf"]), "-p", "x"], ["inspect", str(files["pipe.gguf"])]):
        r = cli_process(*args, timeout=60)
        err = r.stderr.decode()
        assert r.returncode == 1 and "FIFO" in err and len(err.strip().splitlines()) == 1, err


def test_chat_survives_a_full_context(tmp_path, capsys, monkeypatch):
    "A conversation longer than the context forgets its oldest turns instead of ending (issue 10)."
    small = write_gguf(tiny_qwen3(seed=5), tmp_path / "ctx64.gguf", ctx=64)
    turns = b"".join(b"tell me more about the hello world %d\n" % i for i in range(6))
    code, out, err = run_main(capsys, monkeypatch, ["chat", "-m", small, "-n", "6"],
                              stdin=turns + b"x " * 200 + b"\nlast one\n\n")
    assert code == 0, err
    assert out.count("> ") == 9                       # 8 lines read, then the empty line
    assert "the oldest turn is forgotten" in err
    assert "this message does not fit" in err and "Traceback" not in err
