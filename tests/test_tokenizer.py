"""tffedu.tokenizer against HF `tokenizers` built by transformers from the same GGUF files.

Vocabularies: Qwen2/Qwen3 (`qwen2`), Llama 3 (`llama-bpe`) from tests/data, SmolLM2 (`smollm`)
from the default model, and Llama 3's vocabulary under the `tekken` and `smaug-bpe` pre-tokenizers. The oracle is tests/tokenizer_oracle.py (transformers' GGUF converter, cached).
"""
import json

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tests.conftest import DATA
from tests.tokenizer_oracle import hf_backend, hf_fast_tokenizer, vocab_with_pre
from timing import Stopwatch
from tffedu.errors import TffeduError, TokenizerError
from tffedu.tokenizer import (PRE_TOKENIZERS, Tokenizer, TokenType, bpe, bytes_to_unicode,
                              load_tokenizer, to_byte_chars)


def _smollm_path():
    from tffedu.assets import default_model_path
    return default_model_path(quiet=True)


PATHS = {
    "qwen2": lambda: DATA / "ggml-vocab-qwen2.gguf",
    "llama-bpe": lambda: DATA / "ggml-vocab-llama-bpe.gguf",
    "smollm": _smollm_path,
    # Llama 3's vocabulary under two other pre-tokenizers: Mistral's Tekken, and Smaug's (Llama 3's
    # regex without ignore_merges); the oracle is transformers' converter for those names
    "tekken": lambda: vocab_with_pre(DATA / "ggml-vocab-llama-bpe.gguf", "tekken"),
    "smaug-bpe": lambda: vocab_with_pre(DATA / "ggml-vocab-llama-bpe.gguf", "smaug-bpe"),
}
VOCABS = list(PATHS)


@pytest.fixture(scope="module")
def pair(request):
    "(ours, HF tokenizers.Tokenizer, HF fast tokenizer) per vocabulary, built once per module."
    cache = {}

    def get(name):
        if name not in cache:
            path = PATHS[name]()
            if not path.is_file():
                pytest.skip(f"{path} not found")
            cache[name] = (load_tokenizer(path), hf_backend(path), hf_fast_tokenizer(path))
        return cache[name]
    return get


# A multilingual corpus: scripts, emoji with ZWJ/skin tones/flags, code, whitespace runs (leading,
# trailing, tabs, CR/LF), digits of many lengths, contractions in both cases, punctuation runs.
CORPUS = [
    "Hello world",
    "The quick brown fox jumps over the lazy dog.",
    " leading space", "trailing space ", "  two leading", "both sides  ", " ", "  ", "\n", "\n\n\n",
    "a\tb\t\tc", "line one\nline two\r\nline three\rend", "x   \n   y", "   \n\n   indented\n",
    "words    with     many      spaces", "\u00a0nbsp\u2009thin\u3000ideographic space",
    "I'm, you're, he's, we've, they'd, she'll, it's", "I'M YOU'RE HE'S WE'VE THEY'D SHE'LL",
    "don't DON'T Don'T 'tis", "0", "12", "123", "1234", "12345", "123456789012345678901234567890",
    "3.14159 2.71828 1e-10 -42 +7 0x1F 1,000,000", "2025-11-30T05:27:57Z",
    "深度学习推理引擎：从 GGUF 文件加载模型，并在 GPU 上运行。",
    "日本語のテキスト、ひらがな、カタカナ、漢字。東京タワー",
    "한국어 텍스트입니다", "مرحبا بالعالم، كيف حالك؟", "שלום עולם",
    "Привет, мир! Ёжик в тумане. ПРОПИСНЫЕ", "Ελληνικά γράμματα", "हिन्दी पाठ", "ภาษาไทย",
    "café naïve résumé façade über straße", "e\u0301 combining acute, A\u030a ring",
    "👍 👍🏽 👨‍👩‍👧‍👦 🧑🏿‍🚀 🏳️‍🌈 🇯🇵🇫🇷 ❤️ ☕",
    "def f(x):\n    return x ** 2  # square\n\nclass A:\n\tpass\n",
    "for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; }",
    "<div class=\"a\">&amp; &lt;tag&gt;</div>", "https://example.com/path?q=1&r=2#frag",
    "!!! ??? ... --- *** ### $$$ %%% ^^^ ~~~ ||| ```", "a.b,c;d:e!f?g",
    "mixed中文English日本語123ABC", "\x00\x01\x1f\x7f control bytes",
    "\u200b\u200c\u200d\ufeff zero width", "\U0001F600\U0001F64F\U00010348 astral",
    " việc hợp nhiều ektedir lardan jeho",
]


def _specials(fast, vocab_size, limit=6):
    "A few special-token texts of the vocabulary, as HF lists them (ids inside the GGUF vocabulary)."
    toks = [t.content for i, t in sorted(fast.added_tokens_decoder.items()) if i < vocab_size]
    return toks[:limit]


def _special_corpus(fast, vocab_size):
    sp = _specials(fast, vocab_size)
    a, b = sp[0], sp[min(1, len(sp) - 1)]
    return [f"{a}user\nHello{b}\n", f"{a}{a}{b}", f"text{a}text", f" {b} ", f"{a[:-1]} half a token",
            f"x{a}y{b}z" * 3, " ".join(sp)]


@pytest.mark.parametrize("name", VOCABS)
def test_corpus_ids_match_hf(pair, name):
    ours, hf, fast = pair(name)
    corpus = CORPUS + _special_corpus(fast, ours.vocab_size)
    bad = [(s, ours.encode(s, add_bos=False), hf.encode(s, add_special_tokens=False).ids)
           for s in corpus]
    bad = [b for b in bad if b[1] != b[2]]
    assert not bad, f"{len(bad)} of {len(corpus)} texts differ, first: {bad[0]}"


@pytest.mark.parametrize("name", VOCABS)
def test_whole_corpus_at_once(pair, name):
    "One long text: the same words in context, and the word cache in use."
    ours, hf, _ = pair(name)
    text = "\n".join(CORPUS) * 3
    assert ours.encode(text, add_bos=False) == hf.encode(text, add_special_tokens=False).ids


@pytest.mark.parametrize("name", VOCABS)
def test_special_false_treats_control_tokens_as_text(pair, name):
    from tokenizers import Tokenizer as HFTokenizer
    ours, hf, fast = pair(name)
    hf_split = HFTokenizer.from_str(hf.to_str())
    hf_split.encode_special_tokens = True  # HF: special added tokens are not matched
    for s in _special_corpus(fast, ours.vocab_size):
        got = ours.encode(s, special=False, add_bos=False)
        assert got == hf_split.encode(s, add_special_tokens=False).ids, s
        if any(t in s for t in _specials(fast, ours.vocab_size)):
            assert got != ours.encode(s, special=True, add_bos=False)


def test_user_defined_tokens_match_even_with_special_false(pair):
    "Qwen2's [PAD...] tokens are user-defined (type 4): llama.cpp and HF match them always."
    ours, hf, fast = pair("qwen2")
    i = next(i for i, t in fast.added_tokens_decoder.items() if not t.special)
    text = f"a{fast.added_tokens_decoder[i].content}b"
    assert ours.token_types[i] == TokenType.USER_DEFINED
    assert i in ours.encode(text, special=False)
    assert ours.encode(text, special=False) == hf.encode(text, add_special_tokens=False).ids


@pytest.mark.parametrize("name", VOCABS)
def test_decode_matches_hf_and_round_trips(pair, name):
    ours, hf, fast = pair(name)
    for s in CORPUS + _special_corpus(fast, ours.vocab_size):
        ids = ours.encode(s, add_bos=False)
        assert ours.decode(ids) == s
        assert ours.decode(ids) == hf.decode(ids, skip_special_tokens=False)
        # special=False drops the control tokens, like HF's skip_special_tokens
        assert ours.decode(ids, special=False) == hf.decode(ids, skip_special_tokens=True)


def test_llama3_ignore_merges(pair):
    """Llama 3 takes a word that is a token whole (llama.cpp's ignore_merges, Meta's tokenizer.json):
    ' việc' is one token although the merges alone would split it."""
    ours, hf, fast = pair("llama-bpe")
    w = " việc"
    assert hf.encode(w).ids == [hf.token_to_id(to_byte_chars(w))]
    assert ours.encode(w, add_bos=False) == hf.encode(w).ids
    # the converter's output without the flag splits it: the flag matters for this word
    assert len(fast.backend_tokenizer.encode(w, add_special_tokens=False).ids) > 1


@pytest.mark.parametrize("name", VOCABS)
def test_vocab_and_special_ids(pair, name):
    ours, hf, fast = pair(name)
    assert ours.bos_id == fast.bos_token_id
    assert ours.eos_id == fast.eos_token_id
    assert ours.eos_id in ours.eos_ids
    for i in range(ours.vocab_size):  # every token text and id agrees with HF's vocabulary
        if ours.tokens[i] != hf.id_to_token(i):
            pytest.fail(f"token {i}: ours {ours.tokens[i]!r}, HF {hf.id_to_token(i)!r}")


def test_eos_ids_include_end_of_turn(pair):
    qwen, hf_q, _ = pair("qwen2")
    assert {hf_q.token_to_id("<|im_end|>"), hf_q.token_to_id("<|endoftext|>")} <= qwen.eos_ids
    llama, hf_l, _ = pair("llama-bpe")
    assert {hf_l.token_to_id("<|eot_id|>"), hf_l.token_to_id("<|end_of_text|>")} <= llama.eos_ids
    smol, hf_s, _ = pair("smollm")
    assert hf_s.token_to_id("<|im_end|>") in smol.eos_ids
    assert hf_s.token_to_id("<|im_start|>") not in smol.eos_ids


def test_bos_rules(pair):
    # A BOS only when the file says so (the public contract): SmolLM2's file says add_bos_token = false; the
    # qwen2 and llama-bpe vocabulary files have no key, and HF's GGUF import adds none either.
    smol, _, _ = pair("smollm")
    assert smol.encode("Hi") == smol.encode("Hi", add_bos=False)
    qwen, hf_q, _ = pair("qwen2")
    assert qwen.encode("Hi") == hf_q.encode("Hi").ids
    llama, hf, fast = pair("llama-bpe")
    assert llama.encode("Hi") == fast.encode("Hi") == hf.encode("Hi").ids
    # llama.cpp's ids for Llama 3 (BOS first) on request
    assert llama.encode("Hi", add_bos=True) == [fast.bos_token_id] + hf.encode("Hi").ids


def test_bos_from_file_flag(tmp_path):
    "tokenizer.ggml.add_bos_token = true in the file: every encode starts with the BOS id."
    import gguf
    from tffedu.tokenizer import load_tokenizer
    from tffedu.gguf import GGUFFile
    src = GGUFFile(DATA / "ggml-vocab-qwen2.gguf")
    md = src.metadata
    w = gguf.GGUFWriter(str(tmp_path / "v.gguf"), "qwen2")
    w.add_tokenizer_model(md["tokenizer.ggml.model"])
    w.add_tokenizer_pre(md["tokenizer.ggml.pre"])
    w.add_token_list(md["tokenizer.ggml.tokens"])
    w.add_token_types([int(t) for t in md["tokenizer.ggml.token_type"]])
    w.add_token_merges(md["tokenizer.ggml.merges"])
    w.add_bos_token_id(151643)
    w.add_add_bos_token(True)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    tok = load_tokenizer(tmp_path / "v.gguf")
    plain = load_tokenizer(DATA / "ggml-vocab-qwen2.gguf")
    assert tok.encode("Hello world") == [151643] + plain.encode("Hello world")


# ---- random text (hypothesis) ----------------------------------------------------------------------
# Code points unassigned in Python's Unicode tables (category Cn) are left out: whether one is a
# letter depends on each library's Unicode version (the `regex` package calls U+3D000 a letter,
# HF tokenizers does not), so no two implementations need agree on them.
TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cn",)), max_size=40)
WORDY = st.text(st.sampled_from(list("ab 1\n\t'sS.,!é你好👍\u200d")), max_size=30)


@pytest.mark.parametrize("name", VOCABS)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(s=st.one_of(TEXT, WORDY))
def test_random_text_round_trips_and_matches_hf(pair, name, s):
    ours, hf, _ = pair(name)
    ids = ours.encode(s, special=False, add_bos=False, missing="drop")   # HF drops missing bytes
    assert ids == hf.encode(s, add_special_tokens=False).ids
    assert ours.decode(ids) == hf.decode(ids, skip_special_tokens=False)
    if all(c in ours.token_to_id for c in to_byte_chars(s)):  # see test_missing_byte_symbols
        assert ours.encode(s, special=False, add_bos=False) == ids
        assert ours.decode(ids) == s
        assert ours.decode_bytes(ids) == s.encode("utf-8")
    else:   # the default refuses, naming the first character it cannot spell
        with pytest.raises(TokenizerError, match="cannot encode .* at index"):
            ours.encode(s, special=False)


def test_missing_byte_symbols(pair):
    """SmolLM2's vocabulary lacks 21 of the 256 byte symbols (bytes like 0xF1 that its training text
    never contained), so such a byte cannot be encoded. HF and llama.cpp drop it silently; tffedu
    raises by default, and on request puts the unknown token there or drops it like HF."""
    ours, hf, _ = pair("smollm")
    missing = [c for c in bytes_to_unicode().values() if hf.token_to_id(c) is None]
    assert len(missing) == 21 and set(missing) == set(ours._missing)
    s = "a\U00040000b"  # UTF-8 f1 80 80 80: 0xF1 is one of them
    with pytest.raises(TokenizerError, match=r"'\\U00040000' \(U\+40000\) at index 1: .* byte 0xF1;"):
        ours.encode(s)
    dropped = ours.encode(s, missing="drop")
    assert dropped == hf.encode(s, add_special_tokens=False).ids
    assert ours.decode_bytes(dropped) == b"a\x80\x80\x80b"
    unk = ours.encode(s, missing="unk")
    assert ours.unk_id == hf.unk_token_id if hasattr(hf, "unk_token_id") else True
    assert unk == dropped[:1] + [ours.unk_id] + dropped[1:]
    with pytest.raises(TokenizerError, match="missing must be one of"):
        ours.encode(s, missing="ignore")
    no_unk = Tokenizer([c for c in bytes_to_unicode().values() if c != "a"], None, [], pre="gpt2")
    with pytest.raises(TokenizerError, match="no unknown token"):
        no_unk.encode("a", missing="unk")
    # the complete vocabularies round-trip it
    qwen, _, _ = pair("qwen2")
    assert qwen.decode(qwen.encode(s)) == s


def test_lone_surrogate_is_a_clear_error(pair):
    ours, _, _ = pair("qwen2")
    with pytest.raises(TokenizerError, match=r"lone surrogate, U\+D800\) at index 2"):
        ours.encode("ab\ud800c")
    with pytest.raises(UnicodeEncodeError):    # what Python itself says about such a string
        "ab\ud800c".encode("utf-8")


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(s=TEXT)
def test_stream_decoder_never_emits_partial_characters(pair, s):
    ours, _, _ = pair("qwen2")  # a vocabulary with all 256 byte symbols
    ids = ours.encode(s)
    sd = ours.stream_decoder()
    parts = [sd.push(i) for i in ids] + [sd.flush()]
    assert "".join(parts) == s
    assert all("\ufffd" not in p for p in parts) or "\ufffd" in s


# ---- BPE from plain data against HF's BPE model ------------------------------------------------------
@st.composite
def toy_vocab(draw):
    "A random byte-level vocabulary: the 256 byte symbols plus merges drawn from a small alphabet."
    base = list(bytes_to_unicode().values())
    tokens, merges = list(base), []
    alphabet = [to_byte_chars(c) for c in "abcde "]
    for _ in range(draw(st.integers(0, 25))):
        a = draw(st.sampled_from(alphabet + tokens[256:] if len(tokens) > 256 else alphabet))
        b = draw(st.sampled_from(alphabet + tokens[256:] if len(tokens) > 256 else alphabet))
        if a + b not in tokens:
            tokens.append(a + b)
            merges.append(f"{a} {b}")
    return tokens, merges


@settings(max_examples=60, deadline=None)
@given(v=toy_vocab(), s=st.text(st.sampled_from(list("abcde  ")), max_size=25))
def test_plain_data_bpe_matches_hf_bpe_model(v, s):
    from tokenizers import Tokenizer as HFTokenizer, decoders, models, pre_tokenizers
    tokens, merges = v
    ours = Tokenizer(tokens, [1] * len(tokens), merges, pre="gpt-2")
    hf = HFTokenizer(models.BPE({t: i for i, t in enumerate(tokens)},
                                [tuple(m.split(" ")) for m in merges]))
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    hf.decoder = decoders.ByteLevel()
    assert ours.encode(s) == hf.encode(s).ids
    assert ours.decode(ours.encode(s)) == s


def test_merge_rank_order_and_leftmost_tie():
    "Hand-made: the lower rank wins wherever it is; equal pairs merge leftmost first."
    tokens = list(bytes_to_unicode().values()) + ["bc", "ab", "aa", "aaa"]
    ranks = {("b", "c"): 0, ("a", "b"): 1, ("a", "a"): 2, ("aa", "a"): 3}
    assert bpe("abc", ranks) == ["a", "bc"]      # b c (rank 0) before a b (rank 1)
    assert bpe("aaaa", ranks) == ["aa", "aa"]     # leftmost a a first, then the next pair
    assert bpe("aaa", ranks) == ["aa", "a"] or bpe("aaa", ranks) == ["aaa"]
    tok = Tokenizer(tokens, None, ["b c", "a b", "a a", "aa a"], pre="gpt-2")
    assert [tok.tokens[i] for i in tok.encode("aaa")] == ["aaa"]  # (aa, a) is a merge too


def test_long_word_is_fast_and_correct(pair):
    "A 60 kB word without spaces: the heap BPE is O(n log n), not O(n^2)."
    ours, hf, _ = pair("qwen2")
    word = "深度学习推理引擎" * 2500
    clock = Stopwatch()
    ids = ours.encode(word)
    assert not (slow := clock.over(10)), slow
    assert ids == hf.encode(word, add_special_tokens=False).ids


# ---- errors ------------------------------------------------------------------------------------------
def test_unknown_pre_tokenizer_is_an_error():
    with pytest.raises(TokenizerError, match="tokenizer.ggml.pre='mystery'"):
        Tokenizer(["a"], [1], [], pre="mystery")
    assert issubclass(TokenizerError, TffeduError) and issubclass(TokenizerError, ValueError)


def test_known_pre_tokenizers():
    for name in ["qwen2", "smollm", "llama-bpe", "llama3", "gpt2", "gpt-2", "default"]:
        assert name in PRE_TOKENIZERS


# llama.cpp's llama-vocab.cpp: the tokenizer.ggml.pre names it sends down one branch (one pre_type, the
# same flags) with the names we implement
LLAMA_CPP_GROUPS = {
    "llama-bpe": ["llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2",
                  "jina-v5-nano"],
    "qwen2": ["qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2"],
    "gpt-2": ["gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0",
              "mellum", "modern-bert"],
}


@pytest.mark.parametrize("base", list(LLAMA_CPP_GROUPS))
def test_llama_cpp_names_for_the_same_pre_tokenizer(base):
    "A DeepSeek-R1 Qwen distill ('deepseek-r1-qwen') splits text as Qwen2 does, and so on."
    text = "DeepSeek-R1 2025: x=12345;\n\n  héllo wörld's 'LL ok"
    for name in LLAMA_CPP_GROUPS[base]:
        assert PRE_TOKENIZERS[name].split(text) == PRE_TOKENIZERS[base].split(text), name
        assert PRE_TOKENIZERS[name].ignore_merges == PRE_TOKENIZERS[base].ignore_merges


def test_missing_pre_warns_and_uses_default():
    with pytest.warns(UserWarning, match="default"):
        tok = Tokenizer(list(bytes_to_unicode().values()), None, [], pre=None)
    assert tok.pre.name == "default"


@pytest.mark.parametrize("md, msg", [
    ({"tokenizer.ggml.model": "bert", "tokenizer.ggml.tokens": ["a"]}, "'bert' is not supported"),
    ({"tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": ["a"]}, "needs tokenizer.ggml.scores"),
    ({}, "no vocabulary"),
    ({"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.tokens": []}, "empty vocabulary"),
    ({"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.tokens": ["a", "b"],
      "tokenizer.ggml.token_type": [1], "tokenizer.ggml.pre": "gpt2"}, "1 entries for 2 tokens"),
    ({"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.tokens": ["a", "b"], "tokenizer.ggml.pre": "gpt2",
      "tokenizer.ggml.merges": ["ab"]}, r"merges\[0\]"),
    ({"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.tokens": ["a"], "tokenizer.ggml.pre": "gpt2",
      "tokenizer.ggml.eos_token_id": 7}, "eos_token_id = 7"),
    ({"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.tokens": ["a"], "tokenizer.ggml.pre": "gpt2",
      "tokenizer.ggml.add_bos_token": True}, "no tokenizer.ggml.bos_token_id"),
])
def test_bad_metadata_raises_tokenizer_error(md, msg):
    with pytest.raises(TokenizerError, match=msg):
        Tokenizer.from_metadata(md)


def test_bad_ids_and_inputs(pair):
    ours, _, _ = pair("smollm")
    with pytest.raises(TokenizerError, match="outside the vocabulary"):
        ours.decode([ours.vocab_size])
    with pytest.raises(TokenizerError, match="outside the vocabulary"):
        ours.decode([-1])
    with pytest.raises(TokenizerError, match="takes a str"):
        ours.encode(b"bytes")


def test_add_bos_key_is_honoured():
    tokens = list(bytes_to_unicode().values()) + ["<s>"]
    md = {"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.tokens": tokens, "tokenizer.ggml.pre": "qwen2",
          "tokenizer.ggml.token_type": [1] * 256 + [3], "tokenizer.ggml.bos_token_id": 256}
    assert Tokenizer.from_metadata({**md, "tokenizer.ggml.add_bos_token": True}).encode("a") == [256, ord("a") - 33]
    assert Tokenizer.from_metadata(md).encode("a") == [ord("a") - 33]  # qwen2 default: no BOS


def test_file_without_vocabulary(tmp_path):
    "A weights-only GGUF (written by gguf-py) has no tokenizer: a TokenizerError that says so."
    import gguf
    import numpy as np
    path = tmp_path / "weights-only.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_tensor("x", np.zeros(4, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(TokenizerError, match="no vocabulary"):
        load_tokenizer(path)
    with pytest.raises(TokenizerError, match="no tokenizer.json"):
        load_tokenizer(tmp_path)


# ---- Hugging Face folders (tokenizer.json) ---------------------------------------------------------
@pytest.fixture(scope="module")
def hf_folders(tmp_path_factory):
    """HF folders saved by transformers (save_pretrained) from the converted GGUF tokenizers, with the
    oracle's restorations (tests/tokenizer_oracle.py) and, for Qwen, the NFC normalizer and the
    generation_config stop ids of Qwen's real files; for Llama 3, BOS in the post-processor."""
    from transformers import AutoTokenizer
    out = {}
    for name in VOCABS:
        path = PATHS[name]()
        folder = tmp_path_factory.mktemp(name)
        hf_fast_tokenizer(path).save_pretrained(folder)
        spec = json.loads(hf_backend(path).to_str())
        if name == "qwen2":
            spec["normalizer"] = {"type": "NFC"}
            (folder / "generation_config.json").write_text(json.dumps({"eos_token_id": [151645, 151643]}))
        if name == "llama-bpe":  # Meta's: "<|begin_of_text|>" $A
            spec["post_processor"] = {"type": "TemplateProcessing",
                                      "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
                                                 {"Sequence": {"id": "A", "type_id": 0}}],
                                      "pair": [{"Sequence": {"id": "A", "type_id": 0}}],
                                      "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>",
                                                                               "ids": [128000], "tokens": ["<|begin_of_text|>"]}}}
        (folder / "tokenizer.json").write_text(json.dumps(spec))
        out[name] = (folder, AutoTokenizer.from_pretrained(folder))
    return out


@pytest.mark.parametrize("name", VOCABS)
def test_hf_folder_matches_transformers(hf_folders, name):
    folder, hf = hf_folders[name]
    ours = load_tokenizer(folder)
    texts = CORPUS + ["cafe\u0301 A\u030a \u1100\u1161 composed?", "<|im_start|>user\nhi<|im_end|>"]
    for s in texts:
        assert ours.encode(s) == hf.encode(s), s  # add_special_tokens=True: HF adds BOS where due
        ids = ours.encode(s, add_bos=False)
        assert ours.decode(ids) == hf.decode(ids)
    assert ours.chat_template == hf.chat_template
    assert ours.eos_id == hf.eos_token_id and ours.bos_id == hf.bos_token_id
    msgs = [{"role": "user", "content": "hi"}]
    if hf.chat_template:
        assert ours.apply_chat_template(msgs) == hf.apply_chat_template(msgs, tokenize=False,
                                                                        add_generation_prompt=True)


def test_hf_folder_extras(hf_folders):
    qwen, _ = hf_folders["qwen2"]
    tok = load_tokenizer(qwen)
    assert {151645, 151643} <= tok.eos_ids                   # generation_config.json
    assert tok.encode("e\u0301") == tok.encode("\u00e9")     # NFC
    llama, hf = hf_folders["llama-bpe"]
    assert load_tokenizer(llama).encode("x")[0] == 128000    # BOS from the post-processor


def test_hf_folder_errors(hf_folders, tmp_path):
    folder, _ = hf_folders["smollm"]
    spec = json.loads((folder / "tokenizer.json").read_text())
    bad = dict(spec, pre_tokenizer={"type": "Whitespace"})
    (tmp_path / "tokenizer.json").write_text(json.dumps(bad))
    with pytest.raises(TokenizerError, match="pre_tokenizer"):
        load_tokenizer(tmp_path)
    bad = dict(spec, model={"type": "WordPiece", "vocab": {}})
    (tmp_path / "tokenizer.json").write_text(json.dumps(bad))
    with pytest.raises(TokenizerError, match="'WordPiece' is not supported"):
        load_tokenizer(tmp_path)
    bad = dict(spec, normalizer={"type": "Lowercase"})
    (tmp_path / "tokenizer.json").write_text(json.dumps(bad))
    with pytest.raises(TokenizerError, match="normalizer"):
        load_tokenizer(tmp_path)
