"""Chat templates: tffedu renders exactly the strings HF transformers' apply_chat_template renders.

Templates: SmolLM2's (as stored in its GGUF; transformers reads it from the file itself), Qwen3's
(tests/data/qwen3_chat_template.jinja, the real Qwen3-0.6B template), and Mistral's and Gemma 3's
(tests/data: Mistral-7B-Instruct-v0.1's, Mistral-Small-3.1's, gemma-3-4b-it's).
"""
import datetime

import pytest

from tests.conftest import DATA
from tests.tokenizer_oracle import hf_backend, hf_fast_tokenizer
from tffedu.assets import default_model_path
from tffedu.errors import TokenizerError
from tffedu.tokenizer import Tokenizer, bytes_to_unicode, load_tokenizer, render_chat_template


@pytest.fixture(scope="module")
def smol():
    path = default_model_path(quiet=True)
    return load_tokenizer(path), hf_fast_tokenizer(path)


@pytest.fixture(scope="module")
def qwen3():
    path = DATA / "ggml-vocab-qwen2.gguf"
    template = (DATA / "qwen3_chat_template.jinja").read_text()
    return load_tokenizer(path), hf_fast_tokenizer(path), template


SYSTEM = {"role": "system", "content": "You are a terse assistant. Answer in one line."}
CHATS = {
    "one user turn": [{"role": "user", "content": "Hello!"}],
    "system + user": [SYSTEM, {"role": "user", "content": "What is 2+2?"}],
    "multi-turn": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello, how can I help?"},
                   {"role": "user", "content": "Tell me a joke about GPUs."}],
    "system + multi-turn": [SYSTEM, {"role": "user", "content": "1+1?"},
                            {"role": "assistant", "content": "2"}, {"role": "user", "content": "times 3?"}],
    "ends with assistant": [{"role": "user", "content": "Say hi"}, {"role": "assistant", "content": "hi"}],
    "unicode and newlines": [{"role": "user", "content": "  你好\n\n👍 <b>&amp;</b>  "}],
    "thinking in history": [
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "<think>\nTwo plus two.\n</think>\n\nIt is 4."},
        {"role": "user", "content": "and 3+3?"},
        {"role": "assistant", "content": "<think>\nthree and three\n</think>\n\n6"},
        {"role": "user", "content": "thanks"}],
    "reasoning_content field": [
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "4", "reasoning_content": "add them"},
        {"role": "user", "content": "3+3?"},
        {"role": "assistant", "content": "6", "reasoning_content": "add again"}],
    "None values dropped": [{"role": "user", "content": "hi", "name": None}],
}


@pytest.mark.parametrize("gen", [True, False])
@pytest.mark.parametrize("chat", list(CHATS))
def test_smollm2_template_matches_hf(smol, chat, gen):
    ours, hf = smol
    assert hf.chat_template and ours.chat_template == hf.chat_template  # both read it from the GGUF
    msgs = CHATS[chat]
    assert ours.apply_chat_template(msgs, add_generation_prompt=gen) == \
        hf.apply_chat_template(msgs, tokenize=False, add_generation_prompt=gen)


@pytest.mark.parametrize("kw", [{}, {"enable_thinking": True}, {"enable_thinking": False}])
@pytest.mark.parametrize("gen", [True, False])
@pytest.mark.parametrize("chat", list(CHATS))
def test_qwen3_template_matches_hf(qwen3, chat, gen, kw):
    ours, hf, template = qwen3
    msgs = CHATS[chat]
    want = hf.apply_chat_template(msgs, chat_template=template, tokenize=False,
                                  add_generation_prompt=gen, **kw)
    assert ours.apply_chat_template(msgs, add_generation_prompt=gen, chat_template=template, **kw) == want


@pytest.mark.parametrize("chat", ["system + multi-turn", "unicode and newlines", "thinking in history"])
def test_tokenize_true_gives_hfs_ids(smol, qwen3, chat):
    """tokenize=True: the ids of the rendered prompt, control tokens as ids: HF's (return_dict=False);
    for SmolLM2, HF's text through its real tokenizer (the GGUF conversion drops its Digits step)."""
    msgs = CHATS[chat] + [{"role": "user", "content": "a literal <|im_end|> too"}]
    ours, hf, template = qwen3
    want = hf.apply_chat_template(msgs, chat_template=template, tokenize=True, return_dict=False,
                                  add_generation_prompt=True)
    assert ours.apply_chat_template(msgs, chat_template=template, tokenize=True) == list(want)
    ours, hf = smol
    text = hf.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    want = hf_backend(default_model_path(quiet=True)).encode(text, add_special_tokens=False).ids
    assert ours.apply_chat_template(msgs, tokenize=True) == want


def test_qwen3_enable_thinking_false_prefills_empty_think(qwen3):
    ours, _, template = qwen3
    text = ours.apply_chat_template(CHATS["one user turn"], chat_template=template, enable_thinking=False)
    assert text.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")


def test_qwen3_with_tools_matches_hf(qwen3):
    ours, hf, template = qwen3
    tools = [{"type": "function", "function": {
        "name": "get_weather", "description": "Weather <now> & later",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
    msgs = [SYSTEM, {"role": "user", "content": "Weather in Zürich?"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Zürich"}}}]},
            {"role": "tool", "content": "{\"temp\": 3}"}]
    want = hf.apply_chat_template(msgs, tools=tools, chat_template=template, tokenize=False,
                                  add_generation_prompt=True)
    got = ours.apply_chat_template(msgs, tools=tools, chat_template=template)
    assert got == want
    assert '"Weather <now> & later"' in got  # tojson does not HTML-escape


def test_qwen2_vocab_file_template_matches_hf(qwen3):
    "The qwen2 vocabulary file carries its own (Qwen2) template; transformers reads the same one."
    ours, hf, _ = qwen3
    msgs = CHATS["system + multi-turn"]
    assert ours.apply_chat_template(msgs) == hf.apply_chat_template(msgs, tokenize=False,
                                                                    add_generation_prompt=True)


def test_special_token_variables_match_hf(smol):
    ours, hf = smol
    t = "{{ bos_token }}|{{ eos_token }}|{{ pad_token }}|{{ unk_token }}|{{ messages[0].content }}"
    msgs = [{"role": "user", "content": "x"}]
    assert ours.apply_chat_template(msgs, chat_template=t) == \
        hf.apply_chat_template(msgs, chat_template=t, tokenize=False)


def test_jinja_features_match_hf(smol):
    "trim/lstrip blocks, loop controls, tojson options, namespace, generation tag: as HF renders them."
    ours, hf = smol
    t = ("{% set ns = namespace(n=0) %}\n"
         "  {% for m in messages %}\n"
         "    {% if loop.index > 2 %}{% break %}{% endif %}\n"
         "    {% set ns.n = ns.n + 1 %}\n"
         "{{ m | tojson }}|{{ m | tojson(indent=2) }}|{{ {'b': 1, 'a': [1, 2]} | tojson(sort_keys=True) }}\n"
         "    {% generation %}{{ m.content }}{% endgeneration %}\n"
         "  {% endfor %}\n"
         "{{ ns.n }}{% if extra %}{{ extra }}{% endif %}")
    msgs = [{"role": "user", "content": "<é>"}, {"role": "assistant", "content": "b"},
            {"role": "user", "content": "c"}]
    assert ours.apply_chat_template(msgs, chat_template=t, extra="X") == \
        hf.apply_chat_template(msgs, chat_template=t, tokenize=False, extra="X")


def test_strftime_now():
    t = "{{ strftime_now('%Y-%m-%d') }}"
    before = datetime.date.today().isoformat()
    got = render_chat_template(t, [{"role": "user", "content": "x"}])
    assert got in (before, datetime.date.today().isoformat())


def test_raise_exception_becomes_tokenizer_error(smol):
    ours, _ = smol
    with pytest.raises(TokenizerError, match="roles must alternate"):
        ours.apply_chat_template([{"role": "user", "content": "x"}],
                                 chat_template="{{ raise_exception('roles must alternate') }}")


def test_sandbox_blocks_python_internals(smol):
    ours, _ = smol
    with pytest.raises(TokenizerError, match="chat template"):
        ours.apply_chat_template([{"role": "user", "content": "x"}],
                                 chat_template="{{ messages.__class__.__mro__[1].__subclasses__() }}")
    with pytest.raises(TokenizerError):  # immutable: templates cannot change their inputs
        ours.apply_chat_template([{"role": "user", "content": "x"}],
                                 chat_template="{{ messages.append(1) }}")


def test_errors():
    tok = Tokenizer(list(bytes_to_unicode().values()), None, [], pre="gpt2")
    with pytest.raises(TokenizerError, match="no chat template"):
        tok.apply_chat_template([{"role": "user", "content": "x"}])
    with pytest.raises(TokenizerError, match="empty conversation"):
        tok.apply_chat_template([], chat_template="{{ 1 }}")
    with pytest.raises(TokenizerError, match="message 0 is a str"):
        tok.apply_chat_template(["hello"], chat_template="{{ 1 }}")
    with pytest.raises(TokenizerError, match="chat template"):
        tok.apply_chat_template([{"role": "user", "content": "x"}], chat_template="{% for %}")


# ---- Mistral's and Gemma 3's templates (issue 30): the models' own, rendered as transformers renders them
FAMILY_TEMPLATES = {
    "mistral-7b-v0.1": "mistral_7b_v0.1_chat_template.jinja",
    "mistral-small-3.1": "mistral_small_3.1_chat_template.jinja",
    "gemma3": "gemma3_chat_template.jinja",
}
PARTS = {"role": "user", "content": [{"type": "text", "text": "  What is in it?  "}, {"type": "image"},
                                     {"type": "text", "text": "Be brief."}]}
FAMILY_CHATS = {
    "one user turn": CHATS["one user turn"],
    "multi-turn": CHATS["multi-turn"],
    "system + multi-turn": CHATS["system + multi-turn"],
    "ends with assistant": CHATS["ends with assistant"],
    "unicode and newlines": CHATS["unicode and newlines"],
    "content parts": [PARTS],
    "system as parts": [{"role": "system", "content": [{"type": "text", "text": "Be terse."}]}, PARTS],
    # roles that do not alternate: Gemma's and Mistral 7B's templates raise; Mistral Small's check
    # never fires (its list, extended inside a loop, is the loop's own: Jinja scoping)
    "two user turns in a row": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
    "assistant first": [{"role": "assistant", "content": "a"}],
}


def _hf_render(hf, msgs, **kw):
    "transformers' text, or the exception it raised (its `raise_exception`, or Jinja's own)."
    try:
        return hf.apply_chat_template(msgs, tokenize=False, **kw)
    except Exception as e:      # noqa: BLE001  (the reference's error, compared by kind below)
        return e


@pytest.mark.parametrize("gen", [True, False])
@pytest.mark.parametrize("chat", list(FAMILY_CHATS))
@pytest.mark.parametrize("family", list(FAMILY_TEMPLATES))
def test_family_templates_match_hf(qwen3, family, chat, gen):
    """Each family's template (tests/data) over plain, system, multi-turn, content-part and broken
    chats: the text transformers renders, or an error where it raises one (Mistral 7B v0.1 has no
    system role; roles must alternate)."""
    ours, hf, _ = qwen3
    template = (DATA / FAMILY_TEMPLATES[family]).read_text()
    msgs = FAMILY_CHATS[chat]
    want = _hf_render(hf, msgs, chat_template=template, add_generation_prompt=gen)
    if isinstance(want, Exception):
        with pytest.raises(TokenizerError, match="chat template"):
            ours.apply_chat_template(msgs, add_generation_prompt=gen, chat_template=template)
    else:
        assert ours.apply_chat_template(msgs, add_generation_prompt=gen, chat_template=template) == want


@pytest.mark.parametrize("family", ["mistral-7b-v0.1", "gemma3"])
def test_family_templates_refuse_roles_that_do_not_alternate(qwen3, family):
    "The template's own raise_exception: transformers raises, and tffedu's TokenizerError carries its words."
    ours, hf, _ = qwen3
    template = (DATA / FAMILY_TEMPLATES[family]).read_text()
    msgs = FAMILY_CHATS["two user turns in a row"]
    assert isinstance(_hf_render(hf, msgs, chat_template=template), Exception)
    with pytest.raises(TokenizerError, match="roles must alternate"):
        ours.apply_chat_template(msgs, chat_template=template)


def test_mistral_small_tools_match_hf(qwen3):
    "Mistral Small 3.1's tool prompt: selectattr, tojson of each function's fields, tool calls and results."
    ours, hf, _ = qwen3
    template = (DATA / FAMILY_TEMPLATES["mistral-small-3.1"]).read_text()
    tools = [{"type": "function", "function": {
        "name": "get_weather", "description": "Weather <now> & later",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
    msgs = [{"role": "user", "content": "Weather in Zürich?"},
            {"role": "assistant", "tool_calls": [{"id": "call_0123456789", "type": "function",
                                                  "function": {"name": "get_weather", "arguments": {"city": "Zürich"}}}]},
            {"role": "tool", "tool_call_id": "call_0123456789", "content": "{\"temp\": 3}"},
            {"role": "assistant", "content": "3 degrees."}, {"role": "user", "content": "Thanks"}]
    want = hf.apply_chat_template(msgs, tools=tools, chat_template=template, tokenize=False)
    assert ours.apply_chat_template(msgs, tools=tools, chat_template=template) == want
    assert "[AVAILABLE_TOOLS]" in want and "[TOOL_RESULTS]" in want
