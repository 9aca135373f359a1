"""`tffedu serve` (issue 29) through clients we did not write: the `openai` Python client and httpx
against a live server (uvicorn on 127.0.0.1, SmolLM2-135M), checked against the model's own calls
(`model.generate`, `model.logits`) made one by one. The server stops with the module's tests.
"""
import asyncio
import json
import time

import numpy as np
import pytest

from tffedu.assets import default_model_path
from tffedu.engine import load

pytestmark = pytest.mark.slow
openai = pytest.importorskip("openai", reason="the serve tests need tffedu[serve] (pip install -e '.[test]')")
httpx = pytest.importorskip("httpx")
pytest.importorskip("uvicorn")
pytest.importorskip("fastapi")

PROMPTS = ["The capital of France is", "def fibonacci(n):", "Once upon a time", "1, 2, 3, 4,",
           "The sea is", "My favourite colour is", "import numpy as np\n", "Water boils at"]


def engine(srv):
    "The engine behind a running app."
    return srv.app.state.service.loop.engine


@pytest.fixture(scope="module", params=["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def model(request):
    return load(default_model_path(quiet=True), device=request.param)


@pytest.fixture(scope="module")
def server(model):
    from tffedu.serve import ServerThread, make_app
    with ServerThread(make_app(model, max_batch=16)) as s:
        yield s


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0, timeout=120)


def plain(model, prompt, n, **kw):
    "What the server must answer: model.generate's tokens, end-of-text hidden, as text."
    g = model.generate(prompt, n, **kw)
    return model.decode([t for t in g.tokens if t not in model.eos_ids]), g


def chat_ids(model, messages):
    return model.tokenizer.encode(model.tokenizer.apply_chat_template(messages), special=True)


def wait_until_empty(engine, timeout=30.0):
    "The KV pool back to empty: no sequence holds a page (cached prefix pages count as free)."
    t0 = time.time()
    while time.time() - t0 < timeout:
        c = engine.cache
        if not engine.busy and not c.seqs and c.n_free_pages == c.num_pages:
            return True
        time.sleep(0.05)
    return False


# --- the OpenAI client: completions and chat, whole and streamed ---------------------------------
def test_models_and_health(server, client):
    assert [m.id for m in client.models.list().data] == ["SmolLM2-135M-Instruct.Q4_1.gguf"]
    assert client.models.retrieve("SmolLM2-135M-Instruct.Q4_1.gguf") == client.models.list().data[0]
    with pytest.raises(openai.NotFoundError) as e:
        client.models.retrieve("gpt-4o")
    assert e.value.code == "model_not_found"
    assert httpx.get(server.url + "/health").json() == {"status": "ok"}


@pytest.mark.parametrize("prompt", PROMPTS[:3])
def test_completion_equals_generate(model, client, prompt):
    want, g = plain(model, prompt, 12)
    r = client.completions.create(model="m", prompt=prompt, max_tokens=12, temperature=0)
    assert r.choices[0].text == want
    assert r.choices[0].finish_reason == ("length" if g.stop_reason == "length" else "stop")
    assert (r.usage.prompt_tokens, r.usage.completion_tokens) == (len(g.prompt_tokens), len(g.tokens))
    parts = list(client.completions.create(model="m", prompt=prompt, max_tokens=12, temperature=0, stream=True))
    assert "".join(p.choices[0].text for p in parts) == want
    assert parts[-1].choices[0].finish_reason == r.choices[0].finish_reason


def test_chat_equals_generate_over_the_template(model, client):
    msgs = [{"role": "system", "content": "You are brief."}, {"role": "user", "content": "Name a colour."}]
    want, _ = plain(model, chat_ids(model, msgs), 16)
    r = client.chat.completions.create(model="m", messages=msgs, max_tokens=16, temperature=0)
    assert r.choices[0].message.content == want and r.choices[0].message.role == "assistant"
    parts = list(client.chat.completions.create(model="m", messages=msgs, max_tokens=16, temperature=0,
                                                stream=True, stream_options={"include_usage": True}))
    assert parts[0].choices[0].delta.role == "assistant"
    assert "".join(p.choices[0].delta.content or "" for p in parts if p.choices) == want
    assert parts[-1].choices == [] and parts[-1].usage.completion_tokens == r.usage.completion_tokens
    assert r.usage.prompt_tokens == len(chat_ids(model, msgs))


def test_content_parts_and_token_id_prompts(model, client):
    msgs = [{"role": "user", "content": [{"type": "text", "text": "Name "}, {"type": "text", "text": "a fruit."}]}]
    r = client.chat.completions.create(model="m", messages=msgs, max_tokens=8, temperature=0)
    assert r.choices[0].message.content == plain(model, chat_ids(model, [{"role": "user", "content": "Name a fruit."}]), 8)[0]
    ids = model.encode(PROMPTS[1])
    r = client.completions.create(model="m", prompt=ids, max_tokens=8, temperature=0)
    assert r.choices[0].text == plain(model, PROMPTS[1], 8)[0]


def test_several_prompts_and_n_in_openai_order(model, client):
    r = client.completions.create(model="m", prompt=PROMPTS[:2], n=2, max_tokens=6, temperature=0)
    assert [c.index for c in r.choices] == [0, 1, 2, 3]
    want = [plain(model, p, 6)[0] for p in PROMPTS[:2]]
    assert [c.text for c in sorted(r.choices, key=lambda c: c.index)] == [want[0], want[0], want[1], want[1]]


# --- stops, seeds, n, logprobs -------------------------------------------------------------------
def test_stop_strings_cut_the_text_before_the_stop(model, client):
    full, _ = plain(model, PROMPTS[1], 40)
    stop = full[len(full) // 2:len(full) // 2 + 3]        # likely spans two tokens: held back, then cut
    want = full[:full.index(stop)]
    for stream in (False, True):
        r = client.completions.create(model="m", prompt=PROMPTS[1], max_tokens=40, temperature=0,
                                      stop=[stop, "never-seen-stop"], stream=stream)
        parts = list(r) if stream else [r]
        assert "".join(p.choices[0].text for p in parts) == want
        assert parts[-1].choices[0].finish_reason == "stop"


def test_seeded_sampling_repeats_and_n_choices_differ(client):
    kw = dict(model="m", prompt="Once upon a time", max_tokens=12, temperature=1.0, top_p=0.95, seed=1234, n=3)
    a, b = client.completions.create(**kw), client.completions.create(**kw)
    assert [c.text for c in a.choices] == [c.text for c in b.choices]
    assert len({c.text for c in a.choices}) > 1              # choice j samples with seed + j
    c = client.completions.create(**{**kw, "seed": 99})
    assert [x.text for x in c.choices] != [x.text for x in a.choices]


def log_softmax(x):
    x = np.asarray(x, np.float64)
    return x - x.max() - np.log(np.exp(x - x.max()).sum())


def test_logprobs_agree_with_model_logits(model, client):
    prompt = model.encode(PROMPTS[0])
    r = client.completions.create(model="m", prompt=prompt, max_tokens=6, temperature=0, logprobs=3)
    lp = r.choices[0].logprobs
    gen = model.generate(prompt, 6).tokens
    for i, tok in enumerate(gen):
        ref = log_softmax(model.logits(prompt + gen[:i])[-1])
        assert lp.token_logprobs[i] == pytest.approx(ref[tok], abs=2e-3)
        best = np.argsort(-ref, kind="stable")[:3]
        got = lp.top_logprobs[i]
        assert len(got) == 3 and max(got.values()) == pytest.approx(ref[best[0]], abs=2e-3)
        assert sorted(got.values(), reverse=True) == pytest.approx(ref[best].tolist(), abs=2e-3)
    c = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Hi"}], max_tokens=4,
                                       temperature=0, logprobs=True, top_logprobs=2)
    ids = chat_ids(model, [{"role": "user", "content": "Hi"}])
    gen = model.generate(ids, 4).tokens
    for i, e in enumerate(c.choices[0].logprobs.content):
        ref = log_softmax(model.logits(ids + gen[:i])[-1])
        assert e.logprob == pytest.approx(ref[gen[i]], abs=2e-3)
        assert bytes(e.bytes) == model.tokenizer.token_bytes(gen[i]) and len(e.top_logprobs) == 2


# --- many clients at once ------------------------------------------------------------------------
def test_sixteen_concurrent_streams_equal_one_by_one(model, server):
    prompts = [PROMPTS[i % len(PROMPTS)] + " " * (i // len(PROMPTS)) for i in range(16)]
    body = lambda p: {"prompt": p, "max_tokens": 10, "temperature": 0}  # noqa: E731
    alone = [httpx.post(server.url + "/v1/completions", json=body(p), timeout=120).json()["choices"][0]["text"]
             for p in prompts]
    assert alone == [plain(model, p, 10)[0] for p in prompts]

    async def one(cl, p):
        text = ""
        async with cl.stream("POST", server.url + "/v1/completions", json={**body(p), "stream": True}) as r:
            assert r.status_code == 200
            async for line in r.aiter_lines():
                if line.startswith("data: ") and line != "data: [DONE]":
                    text += json.loads(line[6:])["choices"][0]["text"]
        return text

    async def all_at_once():
        async with httpx.AsyncClient(timeout=120) as cl:
            return await asyncio.gather(*(one(cl, p) for p in prompts))

    steps0 = len(engine(server).history)
    assert asyncio.run(all_at_once()) == alone
    batched = [len(sids) for _, sids, _ in engine(server).history[steps0:]]
    assert max(batched) > 1                                 # they ran in one batch, not in turns
    assert wait_until_empty(engine(server))


def test_a_client_that_leaves_mid_stream_frees_its_pages(server):
    with httpx.stream("POST", server.url + "/v1/completions", timeout=60,
                      json={"prompt": "Count: 1, 2, 3,", "max_tokens": 2000, "temperature": 0,
                            "ignore_eos": True, "stream": True}) as r:
        lines = r.iter_lines()
        got = [next(lines) for _ in range(6)]
        assert any(ln.startswith("data: ") for ln in got)
        assert engine(server).cache.seqs                     # it holds pages while it streams
    assert wait_until_empty(engine(server))
    assert httpx.get(server.url + "/health").status_code == 200


def test_metrics_count_what_was_served(server, client):
    client.completions.create(model="m", prompt="Hello", max_tokens=3, temperature=0)
    text = httpx.get(server.url + "/metrics").text
    series = {ln.split(" ")[0]: float(ln.split(" ")[1]) for ln in text.splitlines()
              if ln and not ln.startswith("#")}
    assert series["tffedu_generation_tokens_total"] >= 3
    assert series["tffedu_time_to_first_token_seconds_count"] >= 1
    assert series["tffedu_inter_token_latency_seconds_count"] >= 2
    assert series["tffedu_kv_pages_total"] == engine(server).cache.num_pages
    for name in ("tffedu_requests_waiting", "tffedu_requests_running", "tffedu_kv_pages_used",
                 "tffedu_generation_tokens_per_second", "tffedu_request_latency_seconds_count"):
        assert name in series
