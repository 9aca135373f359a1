"""The fuzz test of issue 10 over the layers above the GGUF byte reader (tests/model_fuzz.py):
metadata types and ranges, config arithmetic, tokenizer fields, HF folders, chat templates and
messages — thousands of cases, each either accepted (and then a graph builds from it) or a
TffeduError, in under a second of CPU, in a process where no allocation over 1 GiB can succeed."""
import json
import pathlib
import subprocess
import sys

import pytest

from hf_models import CHAT_TEMPLATE, tiny_llama, tiny_qwen3, write_gguf
from tests.conftest import DATA

HERE = pathlib.Path(__file__).resolve().parent


def hf_tokenizer_files(folder: pathlib.Path):
    "A small byte-level BPE tokenizer.json (the tokenizers library's own), config and generation files."
    from tokenizers import Tokenizer, models, pre_tokenizers
    from tffedu.tokenizer import bytes_to_unicode
    vocab = {c: i for i, c in enumerate(bytes_to_unicode().values())}
    merges = [("Ġ", "t"), ("h", "e"), ("Ġt", "he")]
    for a, b in merges:
        vocab[a + b] = len(vocab)
    hf = Tokenizer(models.BPE(vocab, merges))
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    hf.add_special_tokens(["<|im_start|>", "<|im_end|>"])
    hf.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"eos_token": "<|im_end|>", "bos_token": None, "chat_template": CHAT_TEMPLATE, "add_bos_token": False}))
    (folder / "generation_config.json").write_text(json.dumps({"eos_token_id": [len(vocab) + 1]}))


@pytest.fixture(scope="module")
def seeds(tmp_path_factory):
    d = tmp_path_factory.mktemp("fuzz-seeds")
    small = dict(hidden=32, heads=2, kv_heads=1, ffn=48, n_regular=300)
    write_gguf(tiny_qwen3(seed=1, **small), d / "qwen3.gguf", n_regular=300)
    write_gguf(tiny_llama(seed=2, tied=True, **small), d / "llama.gguf", n_regular=300)
    for name, make in (("hf-qwen3", tiny_qwen3), ("hf-llama", tiny_llama)):
        make(seed=3, **small).save_pretrained(d / name)
        hf_tokenizer_files(d / name)
    (d / "qwen3.jinja").write_text((DATA / "qwen3_chat_template.jinja").read_text())
    (d / "simple.jinja").write_text(CHAT_TEMPLATE)
    return d


def test_fuzz_the_layers_above_the_byte_reader(seeds):
    r = subprocess.run([sys.executable, str(HERE / "model_fuzz.py"), str(seeds), "--scale", "3"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    print("\n" + json.dumps(summary, indent=1))
    assert summary["n_failures"] == 0, "\n".join(summary["failures"])
    assert summary["cases"] >= 15000 and summary["address_space_limit"]
    assert summary["peak_rss_mb"] - summary["start_rss_mb"] < 1024
    for domain, s in summary["stats"].items():    # every domain both accepts and rejects cases
        assert s["accepted"] > 0 and sum(s["rejected"].values()) > 0, (domain, s)
