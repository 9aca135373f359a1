"""The `tffedu` command: output on stdout, one-line errors on stderr, exit codes (the public contract)."""
import json
import subprocess
import sys

import pytest

import tffedu
from hf_models import tiny_qwen3, write_gguf


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = write_gguf(tiny_qwen3(seed=21, std=0.08), tmp_path_factory.mktemp("cli") / "tiny.gguf")
    return path


def tffedu_cmd(*args, stdin=""):
    return subprocess.run([sys.executable, "-m", "tffedu.cli", *map(str, args)], input=stdin,
                          capture_output=True, text=True, timeout=300)


def test_generate_prints_what_generate_returns(tiny):
    r = tffedu_cmd("generate", "-m", tiny, "-p", "hello world", "-n", "8")
    assert r.returncode == 0, r.stderr
    ref = tffedu.load(tiny).generate("hello world", max_new_tokens=8)
    assert r.stdout == ref.text + "\n"
    r2 = tffedu_cmd("generate", "-m", tiny, "hello world", "-n", "8")   # positional prompt
    assert r2.stdout == r.stdout


@pytest.mark.parametrize("args, code, words", [
    (("generate", "-m", "no/such/model.gguf", "-p", "x"), 1, "no/such/model.gguf"),
    (("generate", "-m", "{tiny}", "-n", "0"), 2, "-n"),
    (("generate", "-m", "{tiny}", "--temp", "-1"), 2, "--temp"),
    (("generate", "-m", "{tiny}", "--top-p", "1.5"), 2, "--top-p"),
    (("generate", "-m", "{tiny}", "--device", "tpu"), 2, "--device"),
    (("generate", "-m", "{tiny}", "-p", "x", "y"), 2, "once"),
    (("inspect", "{bad}"), 1, "GGUF"),
    (("generate", "-m", "{bad}", "-p", "x"), 1, "gguf"),
])
def test_bad_input_is_one_line_and_nonzero(tiny, tmp_path, args, code, words):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\xff" * 40)    # a header with absurd counts
    r = tffedu_cmd(*[a.format(tiny=tiny, bad=bad) for a in args])
    assert r.returncode == code, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tffedu: error:"), r.stderr
    assert words.lower() in lines[0].lower()
    assert r.stdout == ""


def test_inspect_lists_tensors(tiny):
    r = tffedu_cmd("inspect", tiny)
    assert r.returncode == 0, r.stderr
    assert "token_embd.weight" in r.stdout and "qwen3" in r.stdout


def test_chat_streams_replies_turn_by_turn(tiny):
    r = tffedu_cmd("chat", "-m", tiny, "-n", "6", "--no-think", "--system", "be brief",
                   stdin="hello\nand again\n\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("> ") == 3                  # two turns, then the empty line ends it
    assert "<|im_end|>" not in r.stdout


def test_chat_marks_a_reply_cut_by_the_length_limit(tiny):
    "The marker and the note appear exactly when the engine says the reply ended at -n tokens."
    m = tffedu.load(tiny)
    prompt = m.tokenizer.apply_chat_template([{"role": "user", "content": "hello"}],
                                             add_generation_prompt=True, enable_thinking=False)
    ids = m.tokenizer.encode(prompt, special=True)
    for n in (3, 40):
        cut = m.generate(ids, max_new_tokens=n).stop_reason == "length"
        r = tffedu_cmd("chat", "-m", tiny, "-n", n, "--no-think", stdin="hello\n\n")
        assert r.returncode == 0, r.stderr
        assert r.stdout.rstrip().endswith("[...]\n>") == cut, r.stdout
        assert (f"cut at {n} tokens (-n N raises the limit)" in r.stderr) == cut, r.stderr
    assert m.generate(ids, max_new_tokens=3).stop_reason == "length"


def test_inspect_takes_the_default_model(tiny, monkeypatch, capsys):
    from tffedu import assets, cli
    monkeypatch.setattr(assets, "default_model_path", lambda quiet=False: tiny)
    assert cli.main(["inspect"]) == 0
    assert str(tiny) in capsys.readouterr().out


@pytest.mark.parametrize("args, code, words", [
    (["generate", "-n", "8"], 2, "give a prompt"),
    (["generate", ""], 2, "give a prompt"),
    (["chat", "-m", "no/such/model.gguf"], 1, "no/such/model.gguf: no such file or folder"),
    (["bench", "-m", "no/such/folder", "--device", "cuda"], 1, "no such file or folder"),
])
def test_arguments_are_checked_before_any_model_is_loaded(monkeypatch, capsys, args, code, words):
    from tffedu import assets, cli

    def no(*a, **k):
        raise AssertionError("a model was loaded or fetched before the arguments were checked")
    monkeypatch.setattr(assets, "default_model_path", no)
    monkeypatch.setattr(cli, "_load", no)
    try:
        got = cli.main(args)
    except SystemExit as e:           # argparse's own errors exit with status 2
        got = e.code
    assert got == code and words in capsys.readouterr().err


def test_bench_prints_rates(tiny):
    "llama-bench's table (pp and tg rows), and the same rows as JSON for scripts."
    r = tffedu_cmd("bench", "-m", tiny, "-p", "32", "-n", "8", "-r", "2")
    assert r.returncode == 0, r.stderr
    assert "| pp32 |" in r.stdout and "| tg8 |" in r.stdout
    r = tffedu_cmd("bench", "-m", tiny, "-p", "0", "-n", "8", "-d", "16", "-r", "2", "--json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert [x["test"] for x in rows] == ["tg8@d16"] and rows[0]["tps"] > 0 and rows[0]["reps"] == 2


def test_bench_names_the_context_its_tests_need(tiny):
    "A depth past the context: one line naming bench's flags and --n-ctx; --n-ctx sizes the context."
    r = tffedu_cmd("bench", "-m", tiny, "-p", "0", "-n", "8", "-d", "300")
    assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "-d 300" in r.stderr and "need 310 tokens" in r.stderr and "--n-ctx" in r.stderr
    r = tffedu_cmd("bench", "-m", tiny, "-p", "0", "-n", "8", "-d", "16", "-r", "1", "--n-ctx", "26", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)[0]["test"] == "tg8@d16", r.stderr


def test_cuda_device_is_a_clear_error_without_the_gpu_runtime(tiny):
    r = tffedu_cmd("generate", "-m", tiny, "-p", "x", "--device", "cuda")
    assert r.returncode == 1 and "cuda" in r.stderr and len(r.stderr.strip().splitlines()) == 1
