"""Chapter 15 exercises: an SSE reader (reference: OpenAI's own client's SSEDecoder, on hand-made
streams and on the bytes `tffedu serve` sends) and what a stream may send before a stop string
(reference: the definition, by brute force over every continuation)."""
import itertools

import numpy as np
import pytest


def openai_events(raw: bytes):
    pytest.importorskip("openai")
    from openai._streaming import SSEDecoder
    return [(e.event, e.data) for e in SSEDecoder().iter_bytes(iter([raw]))]


STREAMS = [
    b'data: {"a": 1}\n\ndata: [DONE]\n\n',
    b'data: one\ndata: two\n\n',
    b'event: ping\ndata: x\n\n',
    b'event: ping\n\n',
    b': a comment\ndata: y\n\n',
    b'data:no space\n\n',
    b'data:  two spaces\n\n',
    b'data\n\n',
    b'data: a\r\n\r\ndata: b\r\rdata: c\n\n',
    b'unknown: z\ndata: w\n\n\n\n',
    b'data: kept\n\ndata: not finished',
    b'data: x: y: z\n\n',
    b'data: \xc3\xa9t\xc3\xa9 \xe2\x9c\x93\n\n',
    b'',
    b'\n\n\n',
]


def test_ch15_1_sse_events(impl):
    for raw in STREAMS:
        assert impl.sse_events(raw) == openai_events(raw), raw
    rng = np.random.default_rng(15)
    parts = [b"data: ", b"data:", b"event: e", b": c", b"x", b"\xc3\xa9", b" ", b"\n", b"\r\n", b"\r", b"\n\n"]
    for _ in range(300):
        raw = b"".join(parts[i] for i in rng.integers(0, len(parts), rng.integers(1, 14)))
        assert impl.sse_events(raw) == openai_events(raw), raw


def test_ch15_1_sse_events_of_a_real_server(impl):
    """The bytes a live `tffedu serve` streams, read by your function and by OpenAI's client."""
    pytest.importorskip("fastapi")
    httpx = pytest.importorskip("httpx")
    from tffedu.assets import default_model_path
    from tffedu.engine import load
    from tffedu.serve import ServerThread, make_app
    with ServerThread(make_app(load(default_model_path(quiet=True)), max_batch=2)) as srv:
        with httpx.stream("POST", srv.url + "/v1/chat/completions", timeout=120,
                          json={"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 6,
                                "temperature": 0, "stream": True}) as r:
            raw = r.read()
    events = impl.sse_events(raw)
    assert events == openai_events(raw) and events[-1] == (None, "[DONE]") and len(events) >= 3


def brute(text: str, stops: list[str]) -> int:
    "The most of `text` that every continuation's answer (cut at its first stop) begins with."
    alphabet = sorted(set("".join(stops)) | {"#"})
    longest = max(map(len, stops))
    best = len(text)
    for n in range(longest + 1):
        for tail in itertools.product(alphabet, repeat=n):
            full = text + "".join(tail)
            hits = [full.find(s) for s in stops if s in full]
            best = min(best, min(hits) if hits else len(full))
    return best


def test_ch15_2_safe_length(impl):
    rng = np.random.default_rng(2)
    for _ in range(400):
        stops = ["".join(rng.choice(list("ab\n"), rng.integers(1, 4))) for _ in range(rng.integers(1, 3))]
        text = "".join(rng.choice(list("ab\nc"), rng.integers(0, 9)))
        assert impl.safe_length(text, stops) == brute(text, stops), (text, stops)
    assert impl.safe_length("Hello\n\nWorld", ["\n\n"]) == 5
    assert impl.safe_length("Hello\n", ["\n\n"]) == 5


WRONG = {
    "test_ch15_1_sse_events": {
        "splits on \\n only": {"sse_events": lambda raw: [(None, ln[6:]) for ln in raw.decode().split("\n")
                                                           if ln.startswith("data: ")]}},
    "test_ch15_2_safe_length": {
        "sends everything": {"safe_length": lambda text, stops: len(text)},
        "cuts at the stop, holds nothing back": {"safe_length": lambda text, stops: min(
            [text.find(s) for s in stops if s in text] or [len(text)])},
    },
}
