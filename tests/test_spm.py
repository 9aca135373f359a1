"""SentencePiece vocabularies (chapter 04a) against Google's `sentencepiece` on vocabularies it
trained (tests/spm_vocab.py), written as GGUF keys the way llama.cpp's converter writes them."""
import random

import numpy as np
import pytest

import spm_vocab
import tffedu
from tffedu.errors import TokenizerError
from tffedu.spm import SPMTokenizer, spm_merge
from tffedu.tokenizer import Tokenizer, load_tokenizer


@pytest.fixture(scope="module")
def sp():
    return spm_vocab.train()


@pytest.fixture(scope="module")
def tok(sp):
    return Tokenizer.from_metadata(spm_vocab.gguf_keys(sp))


def random_texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    alphabet = (list("abcdefghij klmnopqrstuvwxyz  ABCXYZ.,!?0123456789'\"-") + list("你好世界的是不了我们")
                + ["🙂", "é", "\t", "\n", "\r", "\u2581", "\x00", "𝄞", "Ω"])
    return ["", " ", "   ", "\n", "  two leading", "trailing  ", "12345 3.14159", "▁already▁escaped"] + [
        "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 80))) for _ in range(n)]


def test_ids_are_sentencepieces(sp, tok):
    assert isinstance(tok, SPMTokenizer) and tok.add_bos and tok.bos_id == 1
    for t in random_texts(3000, 0):
        assert tok.encode(t, add_bos=False) == sp.encode(t), repr(t)
        assert tok.encode(t) == [1] + sp.encode(t)                       # BOS by default, as llama.cpp


def test_without_the_space_prefix():
    "Gemma's vocabularies add no dummy prefix (tokenizer.ggml.add_space_prefix false)."
    sp = spm_vocab.train(add_dummy_prefix=False)
    tok = Tokenizer.from_metadata(spm_vocab.gguf_keys(sp, add_space_prefix=False))
    for t in random_texts(500, 1):
        assert tok.encode(t, add_bos=False) == sp.encode(t), repr(t)


def test_decode_gives_the_text_back(sp, tok):
    for t in random_texts(1000, 2):
        ids = sp.encode(t)
        assert tok.decode(ids).removeprefix(" ") == sp.decode(ids)         # SentencePiece drops the prefix
        assert sp.decode(ids) == t or "\u2581" in t                        # (a literal ▁ reads as a space)
        s = tok.stream_decoder()
        assert "".join(s.push(i) for i in ids) + s.flush() == tok.decode(ids)
    assert tok.decode([1, 2], special=False) == "" and tok.decode([1]) == "<s>"


def test_special_tokens_cut_first_and_each_stretch_gets_the_prefix(sp, tok):
    "llama.cpp's rule: the text after a special token is encoded as if alone (with its space prefix)."
    for a, b in (("user\nWhat is 2+2?", "4"), ("", "x"), ("Hi", ""), ("a  b", "  c")):
        text = f"<|im_start|>{a}<|im_end|>{b}"
        want = [3] + (sp.encode(a) if a else []) + [4] + (sp.encode(b) if b else [])
        assert tok.encode(text, add_bos=False) == want, text
    assert tok.encode("<s>hi", add_bos=False) == [1] + sp.encode("hi")           # control text is special,
    assert tok.encode("<s>hi", add_bos=False, special=False) == sp.encode("<s>hi")  # or plain when asked


def test_merge_is_the_naive_definition(sp):
    "The heap and linked list give what rescanning every pair for the best score gives."
    keys = spm_vocab.gguf_keys(sp)
    scores = dict(zip(keys["tokenizer.ggml.tokens"], keys["tokenizer.ggml.scores"].tolist()))

    def naive(chars):
        sym = list(chars)
        while True:
            cand = [(scores[sym[i] + sym[i + 1]], -i) for i in range(len(sym) - 1) if sym[i] + sym[i + 1] in scores]
            if not cand:
                return sym
            i = -max(cand)[1]
            sym[i:i + 2] = [sym[i] + sym[i + 1]]
    for t in random_texts(300, 3):
        s = ("▁" + t).replace(" ", "▁")
        assert spm_merge(s, scores) == naive(s)


def test_bytes_without_tokens_follow_the_missing_policy():
    sp = spm_vocab.train(byte_fallback=False, vocab_size=700)
    keys = spm_vocab.gguf_keys(sp)
    tok = Tokenizer.from_metadata(keys)
    with pytest.raises(TokenizerError, match="no token for its byte"):
        tok.encode("hi 🙂")
    assert tok.encode("hi 🙂", add_bos=False, missing="unk") == tok.encode("hi ", add_bos=False) + [0] * 4
    assert tok.encode("hi 🙂", add_bos=False, missing="drop") == tok.encode("hi ", add_bos=False)


@pytest.mark.parametrize("change,match", [
    (dict(scores=None), "scores"), (dict(scores=[0.0] * 3), "entries"), (dict(scores="abc"), "scores"),
    (dict(scores=np.full(1000, np.nan)), "finite"), (dict(add_space_prefix="yes"), "add_space_prefix"),
    (dict(bos_token_id=10 ** 6), "bos_token_id"), (dict(token_type=[1] * 5), "token_type")])
def test_hostile_keys_are_named(sp, change, match):
    keys = spm_vocab.gguf_keys(sp)
    keys.update({f"tokenizer.ggml.{k}": v for k, v in change.items()})
    keys = {k: v for k, v in keys.items() if v is not None}
    with pytest.raises(TokenizerError, match=match):
        Tokenizer.from_metadata(keys)


def test_malformed_byte_tokens_decode_to_nothing(sp):
    keys = spm_vocab.gguf_keys(sp)
    tokens = list(keys["tokenizer.ggml.tokens"])
    byte = next(i for i, k in enumerate(keys["tokenizer.ggml.token_type"]) if k == 6)
    tokens[byte] = "<0xZZ>"
    tok = Tokenizer.from_metadata({**keys, "tokenizer.ggml.tokens": tokens})
    assert tok.decode([byte]) == "" and tok.token_bytes(byte) == b""


def test_a_model_file_with_a_sentencepiece_vocabulary(sp, tmp_path):
    "A Mistral-shaped GGUF with this vocabulary: text prompts go through it, load_tokenizer reads it back."
    from hf_models import hf_logits, tiny_mistral, write_gguf
    keys = spm_vocab.gguf_keys(sp)
    hf = tiny_mistral(seed=2, n_regular=sp.get_piece_size() - 3, window=8)
    path = write_gguf(hf, tmp_path / "m.gguf", vocab=keys)
    assert isinstance(load_tokenizer(path), SPMTokenizer)
    m = tffedu.load(path)
    prompt = "The quick brown fox"
    ids = m.encode(prompt)
    assert ids == [1] + sp.encode(prompt)
    out = m.generate(prompt, max_new_tokens=6, ignore_eos=True)
    seq = list(ids)
    for _ in range(6):
        seq.append(int(hf_logits(hf, seq)[-1].argmax()))
    assert out.tokens == seq[len(ids):] and out.text == m.decode(out.tokens)


@pytest.mark.parametrize("style", ["legacy", "first", "gemma"])
def test_hf_folders_of_converted_models_are_hf_tokenizers(sp, tmp_path, style):
    """A SentencePiece model converted to tokenizer.json (BPE with byte fallback) in the three styles
    real files have: ids equal HF `tokenizers` running the same file, special tokens included."""
    from tokenizers import Tokenizer as HFTokenizer
    spm_vocab.hf_folder(sp, tmp_path, style)
    ref = HFTokenizer.from_file(str(tmp_path / "tokenizer.json"))
    tok = load_tokenizer(tmp_path)
    assert isinstance(tok, SPMTokenizer) and tok.space_prefix == {"legacy": "each", "first": "first", "gemma": "never"}[style]
    assert tok.add_bos and tok.bos_id == 1 and 2 in tok.eos_ids
    texts = random_texts(800, 4) + ["<|im_start|>user\nHi<|im_end|> ok", "<s>x", " <|im_end|>  y", "a<|im_start|>"]
    for t in texts:
        assert tok.encode(t, add_bos=False) == ref.encode(t, add_special_tokens=False).ids, repr(t)
        ids = ref.encode(t, add_special_tokens=False).ids
        assert tok.decode(ids) == ref.decode(ids, skip_special_tokens=False), repr(t)
    if style == "legacy":                              # the same ids as SentencePiece and the GGUF path
        assert all(tok.encode(t, add_bos=False) == sp.encode(t) for t in texts[:200])


def test_unknown_conversions_are_refused(sp, tmp_path):
    import json
    spm_vocab.hf_folder(sp, tmp_path, "first")
    spec = json.loads((tmp_path / "tokenizer.json").read_text())
    spec["pre_tokenizer"]["prepend_scheme"] = "always"
    (tmp_path / "tokenizer.json").write_text(json.dumps(spec))
    with pytest.raises(TokenizerError, match="not one tffedu knows"):
        load_tokenizer(tmp_path)
    spec["pre_tokenizer"]["prepend_scheme"] = "first"
    spec["model"]["merges"][3] = ["only-one"]
    (tmp_path / "tokenizer.json").write_text(json.dumps(spec))
    with pytest.raises(TokenizerError, match=r"merges\[3\]"):
        load_tokenizer(tmp_path)
