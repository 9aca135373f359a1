"""`tffedu serve` against hostile and odd requests: every malformed body in a table gets a 4xx
OpenAI-style error JSON (never a 500, a hang or a dead server); a full queue answers 503 with
Retry-After; `tffedu serve` itself starts from the command line and stops cleanly on SIGINT/SIGTERM
with a stream in flight. Servers listen on 127.0.0.1 and stop with the tests (or by `timeout`)."""
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from tffedu.assets import default_model_path
from tffedu.engine import load
from tffedu.serve import TextStream
from test_serve import engine, wait_until_empty

pytestmark = pytest.mark.slow
httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")

LONG = "word " * 9000                      # more tokens than the context of 8192
MSG = [{"role": "user", "content": "Hi"}]

# (path, body: a dict sent as JSON, or bytes sent as they are, status, param or None)
BAD = [
    ("/v1/completions", b"{bad json", 400, None),
    ("/v1/completions", b"", 400, None),
    ("/v1/completions", b"\xff\xfe\x00", 400, None),
    ("/v1/completions", b"[1, 2, 3]", 400, None),
    ("/v1/completions", b'{"prompt": "x", "temperature": NaN}', 400, None),
    ("/v1/completions", b'{"prompt": "x", "max_tokens": Infinity}', 400, None),
    ("/v1/completions", b"[" * 100000 + b"]" * 100000, 400, None),
    ("/v1/completions", {}, 400, "prompt"),
    ("/v1/completions", {"prompt": None}, 400, "prompt"),
    ("/v1/completions", {"prompt": 42}, 400, "prompt"),
    ("/v1/completions", {"prompt": []}, 400, "prompt"),
    ("/v1/completions", {"prompt": [[]]}, 400, "prompt"),
    ("/v1/completions", {"prompt": [1, "a"]}, 400, "prompt"),
    ("/v1/completions", {"prompt": [1, 10**9]}, 400, "prompt"),
    ("/v1/completions", {"prompt": [-1]}, 400, "prompt"),
    ("/v1/completions", {"prompt": [True, False]}, 400, "prompt"),
    ("/v1/completions", {"prompt": [1.5]}, 400, "prompt"),
    ("/v1/completions", {"prompt": ["a"] * 65}, 400, "prompt"),
    ("/v1/completions", {"prompt": LONG}, 400, "prompt"),
    ("/v1/completions", {"prompt": "x", "max_tokens": 0}, 400, "max_tokens"),
    ("/v1/completions", {"prompt": "x", "max_tokens": -5}, 400, "max_tokens"),
    ("/v1/completions", {"prompt": "x", "max_tokens": "10"}, 400, "max_tokens"),
    ("/v1/completions", {"prompt": "x", "max_tokens": 10**12}, 400, "max_tokens"),
    ("/v1/completions", {"prompt": "x", "max_tokens": 1.5}, 400, "max_tokens"),
    ("/v1/completions", {"prompt": "x", "temperature": -1}, 400, "temperature"),
    ("/v1/completions", {"prompt": "x", "temperature": 5}, 400, "temperature"),
    ("/v1/completions", {"prompt": "x", "temperature": "hot"}, 400, "temperature"),
    ("/v1/completions", {"prompt": "x", "top_p": 1.5}, 400, "top_p"),
    ("/v1/completions", {"prompt": "x", "top_p": 0}, 400, None),
    ("/v1/completions", {"prompt": "x", "top_k": -1}, 400, "top_k"),
    ("/v1/completions", {"prompt": "x", "min_p": 2}, 400, "min_p"),
    ("/v1/completions", {"prompt": "x", "repetition_penalty": 0}, 400, None),
    ("/v1/completions", {"prompt": "x", "seed": -1}, 400, "seed"),
    ("/v1/completions", {"prompt": "x", "seed": 2**64}, 400, "seed"),
    ("/v1/completions", {"prompt": "x", "seed": "abc"}, 400, "seed"),
    ("/v1/completions", {"prompt": "x", "n": 0}, 400, "n"),
    ("/v1/completions", {"prompt": "x", "n": 1000}, 400, "n"),
    ("/v1/completions", {"prompt": ["a", "b"], "n": 40}, 400, "n"),
    ("/v1/completions", {"prompt": "x", "stop": ""}, 400, "stop"),
    ("/v1/completions", {"prompt": "x", "stop": 5}, 400, "stop"),
    ("/v1/completions", {"prompt": "x", "stop": ["a"] * 17}, 400, "stop"),
    ("/v1/completions", {"prompt": "x", "stop": ["a" * 1025]}, 400, "stop"),
    ("/v1/completions", b'{"prompt": "\\ud800 lone surrogate", "max_tokens": 2}', 400, "prompt"),
    ("/v1/chat/completions", b'{"messages": [{"role": "user", "content": "\\ud83d"}]}', 400, "messages"),
    ("/v1/completions", {"prompt": "x", "stream": "yes"}, 400, "stream"),
    ("/v1/completions", {"prompt": "x", "stream": True, "stream_options": 3}, 400, "stream_options"),
    ("/v1/completions", {"prompt": "x", "stream_options": {"include_usage": True}}, 400, "stream_options"),
    ("/v1/completions", {"prompt": "x", "stream": False, "stream_options": {}}, 400, "stream_options"),
    ("/v1/chat/completions", {"messages": MSG, "stream_options": {"include_usage": True}}, 400, "stream_options"),
    ("/v1/completions", {"prompt": "x", "stream": True, "stream_options": {"include_usage": "yes"}}, 400,
     "stream_options"),
    ("/v1/chat/completions", {"messages": MSG, "stream": True, "stream_options": {"include_usage": 1}}, 400,
     "stream_options"),
    ("/v1/completions", {"prompt": "x", "logprobs": 21}, 400, "logprobs"),
    ("/v1/completions", {"prompt": "x", "logprobs": True}, 400, "logprobs"),
    ("/v1/completions", {"prompt": "x", "echo": True}, 400, "echo"),
    ("/v1/completions", {"prompt": "x", "presence_penalty": 1.0}, 400, "presence_penalty"),
    ("/v1/completions", {"prompt": "x", "logit_bias": {"1": 5}}, 400, "logit_bias"),
    ("/v1/completions", {"prompt": "x", "ignore_eos": 1}, 400, "ignore_eos"),
    *[("/v1/completions", b'{"prompt": "x", "%s": 1%s}' % (name.encode(), b"0" * 400), 400, name)   # past a float
      for name in ("temperature", "top_p", "min_p", "seed", "max_tokens", "n", "logprobs")],
    ("/v1/chat/completions", b'{"messages": [{"role": "user", "content": "x"}], "logprobs": true, "top_logprobs": 1'
     + b"0" * 400 + b"}", 400, "top_logprobs"),
    ("/v1/chat/completions", {}, 400, "messages"),
    ("/v1/chat/completions", {"messages": []}, 400, "messages"),
    ("/v1/chat/completions", {"messages": "hi"}, 400, "messages"),
    ("/v1/chat/completions", {"messages": [1]}, 400, "messages[0]"),
    ("/v1/chat/completions", {"messages": [{"content": "hi"}]}, 400, "messages[0]"),
    ("/v1/chat/completions", {"messages": [{"role": "wizard", "content": "hi"}]}, 400, "messages[0]"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": 5}]}, 400, "messages[0]"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, 400, "messages[0]"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": LONG}]}, 400, "messages"),
    ("/v1/chat/completions", {"messages": MSG, "max_completion_tokens": 0}, 400, "max_completion_tokens"),
    ("/v1/chat/completions", {"messages": MSG, "max_tokens": 9000}, 400, "max_tokens"),
    ("/v1/chat/completions", {"messages": MSG, "top_logprobs": 2}, 400, "top_logprobs"),
    ("/v1/chat/completions", {"messages": MSG, "logprobs": True, "top_logprobs": 50}, 400, "top_logprobs"),
    ("/v1/chat/completions", {"messages": MSG, "logprobs": 3}, 400, "logprobs"),
    ("/v1/chat/completions", {"messages": MSG, "chat_template_kwargs": [1]}, 400, "chat_template_kwargs"),
    ("/v1/chat/completions", {"messages": MSG, "chat_template_kwargs": {"messages": []}}, 400, "chat_template_kwargs"),
    ("/v1/chat/completions", {"messages": MSG, "tools": [{"type": "function"}]}, 400, "tools"),
    ("/v1/chat/completions", {"messages": MSG + [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}]}, 400, "messages[1]"),
    ("/v1/chat/completions", {"messages": MSG, "response_format": {"type": "json_object"}}, 400, "response_format"),
]


@pytest.fixture(scope="module")
def model():
    return load(default_model_path(quiet=True))


@pytest.fixture(scope="module")
def server(model):
    from tffedu.serve import ServerThread, make_app
    with ServerThread(make_app(model, max_batch=8)) as s:
        yield s


def test_the_table_is_large():
    assert len(BAD) >= 30


@pytest.mark.parametrize("path, body, status, param", BAD, ids=range(len(BAD)))
def test_malformed_request_is_a_4xx_error_json(server, path, body, status, param):
    kw = {"content": body, "headers": {"Content-Type": "application/json"}} if isinstance(body, bytes) else {"json": body}
    r = httpx.post(server.url + path, timeout=60, **kw)
    assert r.status_code == status, r.text[:300]
    err = r.json()["error"]
    assert isinstance(err["message"], str) and err["message"] and err["type"] == "invalid_request_error"
    assert param is None or err["param"] == param, err


def test_the_server_stays_up_and_empty_after_the_table(server):
    for path, body, _, _ in BAD[:10]:
        kw = {"content": body} if isinstance(body, bytes) else {"json": body}
        httpx.post(server.url + path, timeout=60, **kw)
    r = httpx.post(server.url + "/v1/completions", json={"prompt": "Hello", "max_tokens": 3, "temperature": 0})
    assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 3
    assert wait_until_empty(engine(server))


@pytest.mark.parametrize("method, path, status", [("GET", "/nope", 404), ("GET", "/v1/completions", 405),
                                                  ("DELETE", "/v1/models", 405), ("POST", "/health", 405)])
def test_unknown_paths_and_methods(server, method, path, status):
    r = httpx.request(method, server.url + path)
    assert r.status_code == status and r.json()["error"]["message"]


def test_a_404_quotes_a_long_path_short(server):
    """A 10 KB path is not echoed whole: the message quotes its start (as the module's `_short`)."""
    r = httpx.get(server.url + "/" + "a" * 10000)
    msg = r.json()["error"]["message"]
    assert r.status_code == 404 and "/aaaa" in msg and len(msg) < 200, msg[:300]


def test_an_integer_past_pythons_digit_limit_is_a_plain_400(server):
    """JSON allows any number of digits; Python's int() refuses more than 4300 and says to call
    sys.set_int_max_str_digits(), advice for a programmer, not a client. A plain 400 instead."""
    for digits in (5000, 100000):
        r = httpx.post(server.url + "/v1/completions", headers={"Content-Type": "application/json"},
                       content=b'{"prompt": "x", "max_tokens": 1' + b"0" * digits + b"}")
        err = r.json()["error"]
        assert r.status_code == 400 and err["type"] == "invalid_request_error", r.text[:300]
        assert "digits" in err["message"] and "sys." not in err["message"] and len(err["message"]) < 200, err


def test_stream_options_need_a_stream(server):
    """OpenAI (and vLLM): stream_options only with "stream": true; null is no stream_options."""
    for path, body in (("/v1/completions", {"prompt": "x"}), ("/v1/chat/completions", {"messages": MSG})):
        body = {**body, "max_tokens": 1, "temperature": 0}
        usage = {"stream_options": {"include_usage": True}}
        r = httpx.post(server.url + path, timeout=60, json={**body, **usage})
        err = r.json()["error"]
        assert r.status_code == 400 and err["param"] == "stream_options" and "stream" in err["message"], err
        r = httpx.post(server.url + path, timeout=60, json={**body, "stream": False, "stream_options": None})
        assert r.status_code == 200, r.text
        r = httpx.post(server.url + path, timeout=60, json={**body, **usage, "stream": True})
        chunks = [json.loads(ln[6:]) for ln in r.text.splitlines() if ln.startswith("data: {")]
        assert r.status_code == 200 and chunks[-1]["usage"]["completion_tokens"] == 1, r.text


def test_retrieve_model(server):
    """GET /v1/models/{id} (OpenAI's retrieve-model): the model object of the list for the served id,
    a 404 with code model_not_found for another (its id quoted short)."""
    listed = httpx.get(server.url + "/v1/models").json()["data"][0]
    r = httpx.get(server.url + "/v1/models/" + listed["id"])
    assert r.status_code == 200 and r.json() == listed, r.text
    for other in ("gpt-4o", "org/name", "x" * 5000):
        r = httpx.get(server.url + "/v1/models/" + other)
        err = r.json()["error"]
        assert r.status_code == 404 and err["code"] == "model_not_found" and len(err["message"]) < 200, r.text[:300]


def test_a_served_id_with_a_slash_is_retrieved(model):
    "A --model-id like a Hugging Face repo's (org/name) is found, sent as it is or percent-encoded."
    from tffedu.serve import ServerThread, make_app
    with ServerThread(make_app(model, model_id="HuggingFaceTB/SmolLM2", max_batch=1, num_pages=8, page_size=32)) as s:
        for path in ("HuggingFaceTB/SmolLM2", "HuggingFaceTB%2FSmolLM2"):
            r = httpx.get(s.url + "/v1/models/" + path)
            assert r.status_code == 200 and r.json()["id"] == "HuggingFaceTB/SmolLM2", r.text


def test_a_body_too_large_is_413(server):
    r = httpx.post(server.url + "/v1/completions", content=b" " * (9 << 20))
    assert r.status_code == 413 and "bytes" in r.json()["error"]["message"]


def test_context_overflow_names_the_code(server):
    r = httpx.post(server.url + "/v1/completions", json={"prompt": "x", "max_tokens": 8192})
    assert r.status_code == 400 and r.json()["error"]["code"] == "context_length_exceeded"


def test_a_full_queue_answers_503_with_retry_after(model):
    from tffedu.serve import ServerThread, make_app
    with ServerThread(make_app(model, max_batch=1, max_queue=1)) as s:
        loop = s.app.state.service.loop
        long = {"prompt": "Count:", "max_tokens": 400, "ignore_eos": True, "temperature": 0}
        with httpx.stream("POST", s.url + "/v1/completions", json={**long, "stream": True}, timeout=60) as a:
            lines = a.iter_lines()                                 # (kept: dropping it closes the stream)
            next(lines)                                            # A runs (max_batch=1) ...
            waiter = threading.Thread(target=httpx.post, args=(s.url + "/v1/completions",),
                                      kwargs={"json": {**long, "max_tokens": 2}, "timeout": 120})
            waiter.start()                                         # ... B waits behind it ...
            t0 = time.time()
            while loop.n_waiting < 1 and time.time() - t0 < 30:
                time.sleep(0.01)
            r = httpx.post(s.url + "/v1/completions", json={"prompt": "x", "max_tokens": 2})   # ... C is refused
            assert r.status_code == 503 and r.headers["Retry-After"] == "1", r.text
            assert r.json()["error"]["code"] == "queue_full"
        waiter.join(120)
        r = httpx.post(s.url + "/v1/completions", json={"prompt": "x", "max_tokens": 2, "n": 2})
        assert r.status_code == 400 and r.json()["error"]["param"] == "n"      # could never be queued
        ok = httpx.post(s.url + "/v1/completions", json={"prompt": "x", "max_tokens": 2, "temperature": 0})
        assert ok.status_code == 200



@pytest.mark.parametrize("warm_up", ["yes", 1, [True]])
def test_warm_up_must_be_a_bool(model, warm_up):
    from tffedu.errors import TffeduError
    from tffedu.serve import make_app
    with pytest.raises(TffeduError, match="warm_up must be True, False or None"):
        make_app(model, max_batch=1, warm_up=warm_up)


def test_warm_up_on_the_cpu_when_asked(model):
    """On the CPU a server does not warm up unless asked; asked, it serves as before (the engine
    back to empty, no step counted)."""
    from tffedu.serve import ServerThread, make_app
    app = make_app(model, max_batch=2, warm_up=True)
    eng = app.state.service.loop.engine
    assert eng.stats["steps"] == 0 and eng.runner.executors and not eng.busy
    with ServerThread(app) as s:
        r = httpx.post(s.url + "/v1/completions", json={"prompt": "x", "max_tokens": 2, "temperature": 0})
        assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 2

# --- the text a choice shows: stop strings held back, then cut -----------------------------------
@pytest.fixture(scope="module")
def tok(model):
    return model.tokenizer


@pytest.mark.parametrize("seed", range(40))
def test_text_stream_equals_the_whole_text_cut_at_the_first_stop(tok, seed):
    import numpy as np
    rng = np.random.default_rng(seed)
    ids = tok.encode("Hello, world! Ünïcödé ✓ — 日本語 and spaces:  1, 2, 3.\nNext line; done.")
    ids = ids + rng.integers(0, len(tok.tokens), 5).tolist()
    whole = tok.decode(ids)
    stops = [whole[a:a + n] for a, n in zip(rng.integers(0, len(whole), 2), rng.integers(1, 6, 2))
             if whole[a:a + n] and "\ufffd" not in whole[a:a + n]]
    ts = TextStream(tok, stops)
    got = "".join(ts.push(t) for t in ids) + ts.finish()
    cut = min([whole.find(s) for s in stops if whole.find(s) >= 0], default=len(whole))
    assert got == whole[:cut] == ts.text
    assert ts.stopped == (cut < len(whole) or any(whole.find(s) == len(whole) for s in stops))


# --- the command line ----------------------------------------------------------------------------
def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_tffedu_serve_starts_and_stops_cleanly_on_a_signal(sig):
    port = free_port()
    # `timeout` ends the server even if this test dies before it does
    # --foreground: `timeout` passes a signal on once (without it, it also signals its process
    # group, and a second SIGINT makes uvicorn exit at once, as a second Ctrl-C would)
    proc = subprocess.Popen(["timeout", "--foreground", "300", sys.executable, "-m", "tffedu.cli", "serve", "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        url = f"http://127.0.0.1:{port}"
        t0 = time.time()
        while True:
            assert proc.poll() is None, proc.communicate()[1][-2000:]
            assert time.time() - t0 < 120, "tffedu serve did not come up"
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        r = httpx.post(url + "/v1/completions", json={"prompt": "Hi", "max_tokens": 3, "temperature": 0})
        assert r.status_code == 200
        with httpx.stream("POST", url + "/v1/completions", timeout=60,
                          json={"prompt": "Count:", "max_tokens": 4000, "ignore_eos": True, "stream": True}) as s:
            lines = s.iter_lines()
            next(lines)
            proc.send_signal(sig)             # while a stream is in flight: drained, then cancelled
            rest = []
            try:
                rest.extend(lines)            # the stream ends (it does not hang)
            except httpx.HTTPError as e:
                pytest.fail(f"the stream broke: {e}; the server said: {proc.communicate()[1][-3000:]}")
        assert proc.wait(60) == 0, proc.communicate()[1][-3000:]
        assert [ln for ln in rest if ln][-1] == "data: [DONE]"
        assert '"finish_reason": "abort"' in "".join(rest)       # cut by the drain, not by a timeout
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_bug_inside_a_route_is_a_500_in_openais_shape(server, monkeypatch):
    import tffedu.serve

    def boom(body, model, engine=None):
        raise ZeroDivisionError("a bug")
    monkeypatch.setattr(tffedu.serve, "parse_completion", boom)
    r = httpx.post(server.url + "/v1/completions", json={"prompt": "x"})
    assert r.status_code == 500 and r.json()["error"]["type"] == "server_error"
    assert "ZeroDivisionError" in r.json()["error"]["message"]
    monkeypatch.undo()
    assert httpx.post(server.url + "/v1/completions", json={"prompt": "x", "max_tokens": 1}).status_code == 200


# --- found by the robustness audit (a server of few pages, stops at the last token, leavers) ------
@pytest.fixture(scope="module")
def small_server(model):
    "A server given fewer K/V pages than a context (`tffedu serve --kv-tokens 256`)."
    from tffedu.serve import ServerThread, make_app
    with ServerThread(make_app(model, max_batch=2, num_pages=8, page_size=32)) as s:   # 256 tokens
        yield s


def test_a_server_with_a_small_kv_cache_refuses_what_it_cannot_hold(small_server):
    """A request that could never fit the cache is a 400 naming the field (as a context overflow
    is), not a 500 from the engine; a chat without max_tokens gets the room the cache has, and
    /v1/models says it."""
    s = small_server
    for stream in (False, True):
        r = httpx.post(s.url + "/v1/completions", timeout=60,
                       json={"prompt": "Hi", "max_tokens": 1000, "stream": stream})
        assert r.status_code == 400, r.text
        err = r.json()["error"]
        assert (err["param"], err["code"]) == ("max_tokens", "context_length_exceeded"), err
        assert "256" in err["message"], err
    r = httpx.post(s.url + "/v1/completions", json={"prompt": "word " * 300, "max_tokens": 1}, timeout=60)
    assert r.status_code == 400 and r.json()["error"]["param"] == "prompt", r.text
    r = httpx.post(s.url + "/v1/chat/completions", json={"messages": MSG, "temperature": 0}, timeout=120)
    assert r.status_code == 200 and r.json()["usage"]["total_tokens"] <= 256, r.text
    assert httpx.get(s.url + "/v1/models").json()["data"][0]["max_model_len"] == 256
    assert wait_until_empty(engine(s))


def test_a_stop_string_the_last_token_completes_finishes_with_stop(model, server):
    """OpenAI (and vLLM): a choice cut by a stop string finishes with "stop", even when the token
    that completed the stop was the last max_tokens allowed."""
    for prompt in ("The capital of France is", "Once upon a time", "1, 2, 3, 4,"):
        toks = [t for t in model.generate(prompt, 8).tokens if t not in model.eos_ids]
        full, head = model.decode(toks), model.decode(toks[:-1])
        stop = full[len(head):].strip()
        if len(toks) == 8 and stop and full.find(stop) >= len(head):   # the 8th token completes it
            break
    else:
        pytest.fail("no prompt whose 8th token holds a stop string seen nowhere before")
    for stream in (False, True):
        r = httpx.post(server.url + "/v1/completions", timeout=60, json={
            "prompt": prompt, "max_tokens": 8, "temperature": 0, "stop": [stop], "stream": stream})
        chunks = [json.loads(ln[6:]) for ln in r.text.splitlines() if ln.startswith("data: {")] if stream \
            else [r.json()]
        assert "".join(c["choices"][0]["text"] for c in chunks) == full[:full.index(stop)]
        assert chunks[-1]["choices"][0]["finish_reason"] == "stop", (stop, chunks[-1])


def test_a_client_that_leaves_a_whole_answer_frees_its_pages(server):
    """A client waiting for a whole (not streamed) answer that hangs up is noticed while its tokens
    still come: its request is cancelled and its pages go back, long before max_tokens."""
    with pytest.raises(httpx.TimeoutException):
        httpx.post(server.url + "/v1/completions", timeout=1.5,
                   json={"prompt": "Count:", "max_tokens": 8000, "ignore_eos": True})
    assert wait_until_empty(engine(server), timeout=20)
    r = httpx.post(server.url + "/v1/completions", json={"prompt": "x", "max_tokens": 2, "temperature": 0})
    assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 2


def completion_logprobs(server, body):
    "(text, tokens, text_offset) of choice 0, from the whole answer or from the stream's chunks."
    r = httpx.post(server.url + "/v1/completions", json=body, timeout=60)
    chunks = [json.loads(ln[6:]) for ln in r.text.splitlines() if ln.startswith("data: {")] \
        if body.get("stream") else [r.json()]
    text, tokens, offsets = "", [], []
    for c in chunks:
        ch = c["choices"][0]
        text += ch["text"]
        if ch["logprobs"]:
            tokens += ch["logprobs"]["tokens"]
            offsets += ch["logprobs"]["text_offset"]
    return text, tokens, offsets


def test_text_offsets_are_where_each_token_begins_whole_or_streamed(model, server):
    """text_offset[k] is where token k's text begins in the choice's text: the length of the text
    of the tokens before it. Streamed too, where a stop string holds text back for a few tokens."""
    prompt = "The capital of France is"
    toks = model.generate(prompt, 12).tokens
    a, b = len(model.decode(toks[:5])), len(model.decode(toks[:8]))
    stop = model.decode(toks[:8])[a:]                   # tokens 5..7: held back while they come
    assert stop and model.decode(toks).find(stop) == a and not set(toks[:8]) & set(model.eos_ids)
    want = [len(model.decode(toks[:k])) for k in range(8)]
    for stream in (False, True):
        text, tokens, offsets = completion_logprobs(server, {"prompt": prompt, "max_tokens": 12, "temperature": 0,
                                                             "logprobs": 1, "stop": [stop], "stream": stream})
        assert text == model.decode(toks)[:a] and len(tokens) == 8 and b > a
        assert offsets == want, (stream, tokens, offsets)


def test_the_default_max_tokens_of_a_completion_shrinks_to_the_room_left(model, small_server):
    """A completion without max_tokens (OpenAI's default: 16) whose prompt leaves less room gets
    what is left, as vLLM does: the client asked for no number that could be wrong."""
    prompt = model.encode("word " * 300)[:250]                      # 6 tokens of room in 256
    r = httpx.post(small_server.url + "/v1/completions", timeout=120,
                   json={"prompt": prompt, "ignore_eos": True, "temperature": 0})
    assert r.status_code == 200, r.text
    assert r.json()["usage"]["completion_tokens"] == 6 and r.json()["choices"][0]["finish_reason"] == "length"
    r = httpx.post(small_server.url + "/v1/completions", json={"prompt": prompt, "max_tokens": 7})
    assert r.status_code == 400 and r.json()["error"]["param"] == "max_tokens"   # asked for: refused


def test_completion_top_logprobs_of_tokens_with_one_text(model, server):
    """OpenAI's legacy completions give top_logprobs as a dict keyed by token text, so tokens of one
    text (here bytes of a CJK character, each U+FFFD alone) share a key. Nothing breaks, whole or
    streamed, and the key holds its likeliest token's logprob: the greedy token's own."""
    prompt = "中文：你好，世界。我"                   # its likeliest next tokens: several partial characters
    for stream in (False, True):
        r = httpx.post(server.url + "/v1/completions", timeout=60, json={
            "prompt": prompt, "max_tokens": 3, "temperature": 0, "logprobs": 20, "stream": stream})
        assert r.status_code == 200, r.text
        chunks = [json.loads(ln[6:]) for ln in r.text.splitlines() if ln.startswith("data: {")] if stream \
            else [r.json()]
        lps = [c["choices"][0]["logprobs"] for c in chunks if c["choices"][0]["logprobs"]]
        rows = [row for lp in lps for row in zip(lp["tokens"], lp["token_logprobs"], lp["top_logprobs"])]
        assert len(rows) == 3 and len(rows[0][2]) < 20                      # a shared key: fewer than 20
        for tok, value, top in rows:
            assert top[tok] == pytest.approx(value) == pytest.approx(max(top.values())), (tok, value, top)


def test_completion_top_logprobs_hold_the_sampled_token(server):
    "OpenAI's completions: top_logprobs has up to logprobs + 1 entries, the sampled token's always among them."
    r = httpx.post(server.url + "/v1/completions", timeout=60, json={
        "prompt": "Once upon a time", "max_tokens": 12, "temperature": 2.0, "seed": 3, "logprobs": 1})
    assert r.status_code == 200, r.text
    lp = r.json()["choices"][0]["logprobs"]
    rows = list(zip(lp["tokens"], lp["token_logprobs"], lp["top_logprobs"]))
    assert len(rows) == 12 and any(len(top) == 2 for _, _, top in rows)    # some draw left the top 1
    for tok, value, top in rows:
        assert len(top) <= 2 and tok in top, (tok, top)
        assert top[tok] == pytest.approx(value) or top[tok] > value, (tok, value, top)   # > : its text's likeliest
