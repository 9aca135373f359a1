"""HF tokenizers built by transformers from the same GGUF files: the oracle of the tokenizer tests.

transformers converts a GGUF vocabulary (AutoTokenizer.from_pretrained(folder, gguf_file=...)) with
its own code, which we did not write. The conversion takes ~20 s for a 150k-token file (gguf-py
parses every array element), so the resulting tokenizer.json is cached in tmp/hf-oracle/ (git-ignored),
keyed by file name, size and modification time. Delete that folder to rebuild.
"""
import os
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
CACHE = ROOT / "tmp" / "hf-oracle"


def _key(path: pathlib.Path) -> str:
    st = path.stat()
    return f"{path.stem}-{st.st_size}-{int(st.st_mtime)}"


def hf_fast_tokenizer(gguf_path):
    """A transformers fast tokenizer (PreTrainedTokenizerFast) converted from `gguf_path` by
    transformers; cached as tokenizer.json + special tokens so the next run takes a second."""
    import json
    from tokenizers import Tokenizer as HFTokenizer
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    path = pathlib.Path(gguf_path).resolve()
    folder = CACHE / _key(path)
    if not (folder / "tokenizer.json").is_file():
        hf = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
        folder.mkdir(parents=True, exist_ok=True)
        special = {k: v for k, v in hf.special_tokens_map.items() if isinstance(v, str)}
        (folder / "special.json").write_text(json.dumps(special))
        if hf.chat_template:  # the template as transformers read it from the GGUF
            (folder / "chat_template.jinja").write_text(hf.chat_template)
        part = folder / "tokenizer.json.part"
        hf.backend_tokenizer.save(str(part))
        os.replace(part, folder / "tokenizer.json")  # atomic: parallel runs never read half a file
    special = json.loads((folder / "special.json").read_text())
    backend = HFTokenizer.from_file(str(folder / "tokenizer.json"))
    fast = PreTrainedTokenizerFast(tokenizer_object=backend, **special)
    if (folder / "chat_template.jinja").is_file():
        fast.chat_template = (folder / "chat_template.jinja").read_text()
    return fast


# transformers' GGUF converter leaves out two things the models' own tokenizer.json files have (and
# llama.cpp applies, keyed on tokenizer.ggml.pre); we put them back so the oracle is the real tokenizer:
# - Llama 3 (Meta's tokenizer.json) and Mistral's Tekken: "ignore_merges": true in the BPE model;
# - SmolLM / StarCoder (HuggingFaceTB's tokenizer.json): a Digits(individual_digits) pre-tokenizer
#   before ByteLevel. Without it "\n\n0" gives [Ċ, Ċ, 0] instead of SmolLM2's [ĊĊ, 0].
IGNORE_MERGES_PRE = {"llama-bpe", "llama3", "llama-v3", "tekken"}
DIGITS_FIRST_PRE = {"smollm", "starcoder"}


def hf_backend(gguf_path):
    """The HF `tokenizers.Tokenizer` converted from `gguf_path`, with the pieces the converter
    drops restored (see above), so it behaves like the model's real tokenizer.json."""
    import json
    from tokenizers import Tokenizer as HFTokenizer
    from tffedu.gguf import GGUFFile

    backend = hf_fast_tokenizer(gguf_path).backend_tokenizer
    with GGUFFile(gguf_path) as f:
        pre = f.metadata.get("tokenizer.ggml.pre")
    spec = json.loads(backend.to_str())
    if pre in IGNORE_MERGES_PRE:
        spec["model"]["ignore_merges"] = True
    elif pre in DIGITS_FIRST_PRE:
        assert spec["pre_tokenizer"]["type"] == "ByteLevel", spec["pre_tokenizer"]
        spec["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": True}, spec["pre_tokenizer"]]}
    else:
        return backend
    return HFTokenizer.from_str(json.dumps(spec))


def vocab_with_pre(gguf_path, pre: str) -> pathlib.Path:
    """A copy of the vocabulary-only GGUF `gguf_path` whose tokenizer.ggml.pre is `pre` (under
    tmp/vocab/, with the source's modification time, so the oracle's cache finds it next time):
    another pre-tokenizer's words over a real vocabulary of merges."""
    import struct
    src = pathlib.Path(gguf_path)
    out = ROOT / "tmp" / "vocab" / f"{src.stem}-as-{pre}.gguf"
    if not out.is_file():
        raw = src.read_bytes()
        key = b"tokenizer.ggml.pre"
        at = raw.index(struct.pack("<Q", len(key)) + key) + 8 + len(key)   # the value: type, length, text
        assert struct.unpack_from("<I", raw, at)[0] == 8, "a string"
        n = struct.unpack_from("<Q", raw, at + 4)[0]
        value = pre.encode()
        out.parent.mkdir(parents=True, exist_ok=True)
        part = out.with_suffix(f".{os.getpid()}.part")
        part.write_bytes(raw[:at + 4] + struct.pack("<Q", len(value)) + value + raw[at + 12 + n:])
        os.utime(part, (src.stat().st_atime, src.stat().st_mtime))
        os.replace(part, out)                        # atomic: parallel runs never read half a file
    return out
