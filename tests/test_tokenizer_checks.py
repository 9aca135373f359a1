"""Hostile tokenizer inputs (issue 10): wrongly typed GGUF metadata, broken Hugging Face tokenizer
folders, chat templates that try to build huge values or run forever, odd chat messages. Every
one must be a TokenizerError with a message that names the problem, and fail fast."""
import json
import os

import numpy as np
import pytest

from tests.conftest import DATA
from timing import Stopwatch
from tffedu.errors import NoTokenizerError, TffeduError, TokenizerError
from tffedu.gguf import GGUFFile
from tffedu.tokenizer import Tokenizer, bytes_to_unicode, load_tokenizer, render_chat_template

BYTES = list(bytes_to_unicode().values())


@pytest.fixture(scope="module")
def qwen_md():
    with GGUFFile(DATA / "ggml-vocab-qwen2.gguf") as f:
        return dict(f.metadata)


@pytest.mark.parametrize("key, value, words", [
    ("tokenizer.ggml.merges", np.arange(4, dtype=np.int32), "merges must be an array of strings"),
    ("tokenizer.ggml.merges", [1, 2], r"merges\[0\] = 1 is not a pair"),
    ("tokenizer.ggml.merges", "a b", "merges must be an array of strings, got str"),
    ("tokenizer.ggml.bos_token_id", "151643", "bos_token_id must be an integer id, got str"),
    ("tokenizer.ggml.eos_token_id", True, "eos_token_id must be an integer id, got bool"),
    ("tokenizer.ggml.eos_token_id", 1.5, "eos_token_id must be an integer id, got float"),
    ("tokenizer.ggml.padding_token_id", 2**40, "padding_token_id = 1099511627776 is outside"),
    ("tokenizer.ggml.eos_token_id", 151936, "eos_token_id = 151936 is outside the vocabulary of 151936"),
    ("tokenizer.ggml.bos_token_id", -1, "bos_token_id = -1 is outside"),
    ("tokenizer.ggml.pre", ["qwen2"], "pre must be a string, got list"),
    ("tokenizer.ggml.pre", 7, "pre must be a string, got int"),
    ("tokenizer.ggml.tokens", np.arange(10, dtype=np.int32), "tokens must be an array of strings; entry 0"),
    ("tokenizer.ggml.tokens", [["a"], ["b"]], "tokens must be an array of strings; entry 0 is list"),
    ("tokenizer.ggml.token_type", np.full(151936, 7, np.int32), r"token_type\[0\] = 7 is not a token type"),
    ("tokenizer.ggml.token_type", np.ones(3, np.float32), "token_type must be an integer array"),
    ("tokenizer.ggml.token_type", ["1"] * 151936, r"token_type\[0\] = '1'"),
    ("tokenizer.ggml.add_bos_token", 1, "add_bos_token must be a bool, got int"),
    ("tokenizer.chat_template", ["{{ x }}"], "chat_template must be a string"),
    ("tokenizer.ggml.model", ["gpt2"], "is not supported"),
])
def test_wrongly_typed_metadata(qwen_md, key, value, words):
    with pytest.raises(TokenizerError, match=words):
        Tokenizer.from_metadata({**qwen_md, key: value})


# qwen2's vocabulary with these merges ranked first: none of 'QZ', 'QZQ', 'QÃ', 'xq', 'xqj' is a token.
BAD_MERGES = ["Q Z", "QZ Q", "Q Ã", "x q", "xq j"]
# what llama.cpp's llama-tokenize (the peers/ tarball, commit 0c1e570) printed for that file, --ids
LLAMA_CPP_IDS = {"QZQZ": [48, 57, 48, 57], "QZQ xqj": [48, 57, 48, 220, 87, 80, 73],
                 "hello QZ world": [14990, 220, 48, 57, 1879], "xqjQ": [87, 80, 73, 48], "Qé": [48, 102]}


def test_gguf_merges_outside_the_vocabulary(qwen_md):
    """A GGUF's merges may form strings the vocabulary lacks. llama.cpp takes them (llama-vocab.cpp
    reads tokenizer.ggml.merges without looking tokens up), BPE merges strings, and a final piece that
    is no token becomes the tokens of its bytes (llm_tokenizer_bpe_session::tokenize); so do we, with
    llama.cpp's ids. One difference, on purpose: llama.cpp looks each raw UTF-8 byte of such a piece
    up as a one-byte string, so a byte whose byte-level character is not ASCII ('Ã', 0xC3 of 'é') finds
    no token and is dropped: its 'Qé' is Q + the byte 0xA9, invalid UTF-8. We give that byte's token:
    the ids decode to the text."""
    vocab = set(qwen_md["tokenizer.ggml.tokens"])
    assert not any(m.replace(" ", "") in vocab for m in BAD_MERGES)
    tok = Tokenizer.from_metadata({**qwen_md, "tokenizer.ggml.merges": BAD_MERGES + list(qwen_md["tokenizer.ggml.merges"])})
    for text, ids in LLAMA_CPP_IDS.items():
        ours = tok.encode(text)
        assert all(0 <= i < tok.vocab_size for i in ours) and tok.decode(ours) == text
        if text != "Qé":
            assert ours == ids, text
    assert tok.encode("Qé") == [48, tok.token_to_id["Ã"], 102]       # llama.cpp: [48, 102]


def test_no_vocabulary_is_its_own_error(tmp_path):
    "A weights-only file is not broken: NoTokenizerError (a TokenizerError) tells the loader so."
    with pytest.raises(NoTokenizerError):
        Tokenizer.from_metadata({"general.architecture": "llama"})
    with pytest.raises(NoTokenizerError, match="no tokenizer.json"):
        load_tokenizer(tmp_path)
    assert issubclass(NoTokenizerError, TokenizerError)


@pytest.mark.parametrize("key, value, words", [
    ("tokenizer.ggml.eos_token_id", 10**6, "eos_token_id = 1000000 is not a token id of the model's 503-token"),
    ("tokenizer.ggml.eot_token_id", -3, "eot_token_id = -3 is not a token id"),
    ("tokenizer.ggml.eos_token_id", "2", "eos_token_id = '2' is not a token id"),
])
def test_stop_ids_of_a_file_without_vocabulary(tmp_path, key, value, words):
    """A weights-only GGUF may still carry EOS/EOT ids, which the model stops on: each must be a row of
    its output. llama.cpp (llama-vocab.cpp, load) skips an id past the vocabulary with a warning and
    refuses a key of the wrong type (llama-model-loader: 'key ... has wrong type'); we refuse both."""
    from hf_models import tiny_qwen3, write_gguf
    from tffedu.model import load
    path = write_gguf(tiny_qwen3(seed=1), tmp_path / "bare.gguf", tokenizer=False, extra={key: value})
    with pytest.raises(TokenizerError, match=words):
        load(path, warm=False)
    ok = write_gguf(tiny_qwen3(seed=1), tmp_path / "ok.gguf", tokenizer=False,
                    extra={"tokenizer.ggml.eos_token_id": 7})
    assert load(ok, warm=False).eos_ids == {7}


def test_too_many_special_tokens():
    n = (1 << 16) + 1
    with pytest.raises(TokenizerError, match="marks 65537 tokens special"):
        Tokenizer([f"<s{i}>" for i in range(n)], [3] * n, [], pre="gpt2")


# --- Hugging Face folders ------------------------------------------------------------------------
@pytest.fixture
def hf_folder(tmp_path):
    "A small valid HF tokenizer folder (tokenizers' own BPE, saved by the tokenizers library)."
    from tokenizers import Tokenizer as HFTokenizer, models, pre_tokenizers
    vocab = {c: i for i, c in enumerate(BYTES)}
    vocab.update({"ab": 256, "<|end|>": 257})
    hf = HFTokenizer(models.BPE(vocab, [("a", "b")]))
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    hf.add_special_tokens(["<|end|>"])
    hf.save(str(tmp_path / "tokenizer.json"))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|end|>"}))
    tok = load_tokenizer(tmp_path)
    assert tok.encode("ab") == [256] and tok.eos_id == 257
    return tmp_path


def _edit(folder, name, fn):
    p = folder / "tokenizer.json"
    spec = json.loads(p.read_text())
    fn(spec)
    p.write_text(json.dumps(spec))


@pytest.mark.parametrize("what, edit, words", [
    ("vocab id 10^9", lambda s: s["model"]["vocab"].update({"zz": 10**9}), "token id 1000000000 is not an integer"),
    ("sparse ids", lambda s: s["model"]["vocab"].update({"zz": 3_000_000}), "token ids run up to 3000000 for"),
    ("negative id", lambda s: s["model"]["vocab"].update({"zz": -1}), "token id -1 is not an integer"),
    ("string id", lambda s: s["model"]["vocab"].update({"zz": "3"}), "token id '3'"),
    ("vocab a list", lambda s: s["model"].update(vocab=[1, 2]), "model type 'BPE' is not supported"),
    ("model a string", lambda s: s.update(model="BPE"), "model type 'BPE' is not supported"),
    ("added token without id", lambda s: s["added_tokens"][0].pop("id"), "token id None"),
    ("added token content int", lambda s: s["added_tokens"][0].update(content=5), "added_tokens must be"),
    ("merges of ints", lambda s: s["model"].update(merges=[1]), r"merges\[0\] = 1"),
    ("pre_tokenizer a list", lambda s: s.update(pre_tokenizer=[1]), "pre_tokenizer"),
    ("post_processor a list", lambda s: s.update(post_processor=[1]), "post_processor must be an object"),
])
def test_broken_tokenizer_json(hf_folder, what, edit, words):
    _edit(hf_folder, "tokenizer.json", edit)
    clock = Stopwatch()
    with pytest.raises(TokenizerError, match=words):
        load_tokenizer(hf_folder)
    assert not (slow := clock.over(1)), slow


@pytest.mark.parametrize("key, value", [("continuing_subword_prefix", "##"), ("end_of_word_suffix", "</w>"),
                                        ("dropout", 0.5)])
def test_bpe_options_we_do_not_run(hf_folder, key, value):
    """BPE options that change what HF's tokenizers gives (a prefix on non-initial pieces, a suffix on
    final ones, random dropout of merges: tokenizers' models.BPE) are refused by name, not ignored."""
    _edit(hf_folder, "tokenizer.json", lambda s: s["model"].update({key: value}))
    with pytest.raises(TokenizerError, match=f"model.{key} .* is not supported"):
        load_tokenizer(hf_folder)


@pytest.mark.parametrize("name, content, words", [
    ("tokenizer.json", b"{not json", "tokenizer.json: not valid JSON"),
    ("tokenizer.json", b"[1, 2]", "top level must be a JSON object, got list"),
    ("tokenizer.json", b"\xff\xfe{}", "not UTF-8"),
    ("tokenizer.json", b"[" * 100_000, "not valid JSON"),
    ("tokenizer_config.json", b"[]", "tokenizer_config.json: the top level must be a JSON object"),
    ("tokenizer_config.json", json.dumps({"eos_token": 5}).encode(), "a special token must be a string"),
    ("tokenizer_config.json", json.dumps({"add_bos_token": "yes"}).encode(), "add_bos_token must be true or false"),
    ("generation_config.json", json.dumps({"eos_token_id": "x"}).encode(), "eos_token_id 'x' is not a token id"),
    ("generation_config.json", json.dumps({"eos_token_id": [1, 10**6]}).encode(), "eos_token_id 1000000"),
    ("generation_config.json", b"{", "generation_config.json: not valid JSON"),
    ("chat_template.jinja", b"{{ '\xff' }}", "chat_template.jinja: not UTF-8"),
])
def test_broken_folder_files(hf_folder, name, content, words):
    (hf_folder / name).write_bytes(content)
    with pytest.raises(TokenizerError, match=words):
        load_tokenizer(hf_folder)


def test_folder_files_must_be_regular(hf_folder):
    (hf_folder / "generation_config.json").mkdir()
    with pytest.raises(TokenizerError, match="is a folder, not a regular file"):
        load_tokenizer(hf_folder)
    os.rmdir(hf_folder / "generation_config.json")
    os.mkfifo(hf_folder / "chat_template.jinja")      # would block a plain open() forever
    with pytest.raises(TokenizerError, match="FIFO"):
        load_tokenizer(hf_folder)


@pytest.mark.parametrize("merge, token", [
    (["c", "d"], "cd"),              # the merged token is missing
    ("zz b", "zz"),                  # the left one ('a b' strings, the older form)
    (["a", "zz"], "zz"),             # the right one
])
def test_merges_outside_the_vocabulary(hf_folder, merge, token):
    """HF's tokenizers refuses a tokenizer.json whose merge names a token model.vocab lacks; so do we,
    naming the merge and the token."""
    from tokenizers import Tokenizer as HFTokenizer
    old = ["a b"] if isinstance(merge, str) else [["a", "b"]]     # one form in a file, as tokenizers wants
    _edit(hf_folder, "tokenizer.json", lambda s: s["model"].update(merges=old + [merge]))
    with pytest.raises(Exception, match=f"Token `{token}` out of vocabulary"):
        HFTokenizer.from_file(str(hf_folder / "tokenizer.json"))
    shown = merge if isinstance(merge, str) else " ".join(merge)
    with pytest.raises(TokenizerError, match=rf"tokenizer.json: merges\[1\] = '{shown}' needs the token "
                                             rf"'{token}', which model.vocab lacks"):
        load_tokenizer(hf_folder)


def _hf_auto(folder):
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(str(folder))


@pytest.mark.parametrize("name, content", [
    ("tokenizer_config.json", {"eos_token": "<|nope|>"}),
    ("tokenizer_config.json", {"bos_token": "<|nope|>", "eos_token": "<|end|>"}),
    ("special_tokens_map.json", {"eos_token": {"content": "<|nope|>", "lstrip": False}}),
])
def test_bos_or_eos_the_vocabulary_lacks(hf_folder, name, content):
    """transformers adds a BOS/EOS that tokenizer.json lacks as a new special token (id 258 here, one
    past the vocabulary: a row the model's embedding does not have); we refuse, naming file and token."""
    (hf_folder / name).write_text(json.dumps(content))
    hf, key = _hf_auto(hf_folder), next(k for k, v in content.items() if "nope" in str(v))
    assert getattr(hf, key) == "<|nope|>" and getattr(hf, key + "_id") == 258 and len(hf) == 259
    with pytest.raises(TokenizerError, match=rf"{name}: {key} '<\|nope\|>' is not in tokenizer.json's "
                                             rf"vocabulary \(transformers would add it as a new token, id 258\)"):
        load_tokenizer(hf_folder)


@pytest.mark.parametrize("config, special_map, eos", [
    ({}, {"eos_token": "<|end|>"}, 257),                                     # only the map names it
    ({"eos_token": "ab"}, {"eos_token": {"content": "<|end|>"}}, 257),         # the map wins
    ({"eos_token": "<|end|>", "added_tokens_decoder": {"257": {               # ... unless the config
        "content": "<|end|>", "special": True, "lstrip": False, "rstrip": False,  # has added_tokens_decoder
        "normalized": False, "single_word": False}}}, {"eos_token": "ab"}, 257),
])
def test_special_tokens_map_as_transformers_reads_it(hf_folder, config, special_map, eos):
    "special_tokens_map.json (older folders): read when and as transformers reads it."
    (hf_folder / "tokenizer_config.json").write_text(json.dumps(config))
    (hf_folder / "special_tokens_map.json").write_text(json.dumps(special_map))
    assert _hf_auto(hf_folder).eos_token_id == eos
    assert load_tokenizer(hf_folder).eos_id == eos


# --- chat templates ------------------------------------------------------------------------------
CHAT = [{"role": "user", "content": "hi"}]
HOSTILE = {
    "string repeat": ("{{ 'x' * 10**10 }}", "repeating a sequence"),
    "list repeat": ("{{ [1] * 10**10 }}", "repeating a sequence"),
    # a million elements is a quarter of the bound, but 35M characters once printed
    "repeat of what prints long": ("{{ messages * 1000000 }}", "repeating a sequence"),
    "huge power": ("{{ 7 ** 100000000 }}", "bits"),
    "integer squaring": ("{% set ns = namespace(x=3) %}{% for i in range(40) %}{% set ns.x = ns.x * ns.x %}"
                         "{% endfor %}", "bits"),
    "nested loops": ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
                     "longer than"),
    "output flood": ("{% for i in range(100000) %}{% for j in range(1000) %}xxxxxxxx{% endfor %}{% endfor %}",
                     "longer than"),
    "~ doubling": ("{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}"
                   "{% endfor %}", "concatenation"),
    "+ doubling": ("{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}"
                   "{% endfor %}", "concatenation"),
    "ljust": ("{{ 'x'.ljust(10**9) }}", "ljust"),
    "center filter": ("{{ 'x' | center(10**9) }}", "center"),
    "indent filter": ("{{ ('a\n' * 1000000) | indent(1000) }}", "indent"),
    "str.format width": ("{{ '{:>999999999}'.format('x') }}", "format spec"),
    "% width": ("{{ '%999999999d' % 1 }}", "format spec"),
    "format filter width": ("{{ '%999999999s' | format('x') }}", "format spec"),
    "replace growth": ("{{ ('x' * 1000000) | replace('x', 'yyyyyyyyyy') }}", "replace"),
    "join growth": ("{% set s = 'x' * 1000000 %}{{ ([s] * 4) | join(s) }}", "join"),
    "str.join growth": ("{% set s = 'x' * 1000000 %}{{ s.join([s] * 4) }}", "join"),
    "expandtabs": ("{{ ('\t' * 100000).expandtabs(1000) }}", "expandtabs"),
    "tojson indent": ("{{ messages | tojson(indent=10**6) }}", "tojson"),
    "lipsum": ("{{ lipsum(10**7) }}", "lipsum"),
    "recursion": ("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", "RecursionError"),
    "zero division": ("{{ 1 // 0 }}", "ZeroDivisionError"),
    "type error": ("{{ messages + 1 }}", "TypeError"),
    "float overflow": ("{{ 10.0 ** 400 }}", "OverflowError"),
    "internals": ("{{ messages.__class__.__mro__ }}", "unsafe|undefined"),
    "too long": ("x" * (1 << 19), "characters; tffedu renders at most"),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_templates_fail_fast(name):
    import resource
    template, words = HOSTILE[name]
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    clock = Stopwatch()
    with pytest.raises(TokenizerError, match=words):
        render_chat_template(template, CHAT)
    assert not (slow := clock.over(2.0)), slow       # the deadline is 1 s of wall-clock time
    grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss) * 1024
    assert grown < 400 << 20, f"peak memory grew by {grown >> 20} MB"


def test_big_but_fine_templates_still_render():
    "The bounds leave room: a long chat, a 1 MB string, loops of 10^4, big integers as values."
    chat = [{"role": "user" if i % 2 == 0 else "assistant", "content": "word " * 200} for i in range(500)]
    out = render_chat_template("{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}", chat)
    assert len(out) > 500_000
    assert len(render_chat_template("{{ 'x' * 1000000 }}", CHAT)) == 1_000_000
    assert render_chat_template("{% for i in range(10000) %}{% endfor %}{{ 2 ** 100 }}", CHAT) == str(2**100)
    assert render_chat_template("{{ 100000 | string }}{{ '%5d' % 3 }}", CHAT) == "100000    3"


@pytest.mark.parametrize("messages, words", [
    ([{"role": 5, "content": "x"}], "'role' must be a str, got int"),
    ([{"content": "x"}], "'role' must be a str, got NoneType"),
    ([{"role": "user", "content": 5}], "'content' must be a str .* got int"),
    ([{"role": "user", "content": {"a": 1}}], "'content' must be a str .* got dict"),
    ([{"role": "user", "content": b"x"}], "got bytes"),
    ("hello", "messages must be a list of dicts, got str"),
    ({"role": "user"}, "messages must be a list of dicts, got dict"),
    (None, "messages must be a list of dicts, got NoneType"),
    ([], "empty conversation"),
])
def test_odd_messages(messages, words):
    with pytest.raises(TokenizerError, match=words):
        render_chat_template("{{ messages }}", messages)


def test_content_parts_and_none_content_are_fine():
    "HF allows content as a list of parts, and None (dropped): so do we."
    out = render_chat_template("{% for m in messages %}{{ m.content is string }}{% endfor %}",
                               [{"role": "user", "content": [{"type": "text", "text": "hi"}]},
                                {"role": "assistant", "content": None}])
    assert out == "FalseFalse"


def test_errors_are_tffedu_errors():
    for cls in (TokenizerError, NoTokenizerError):
        assert issubclass(cls, TffeduError) and issubclass(cls, ValueError)
