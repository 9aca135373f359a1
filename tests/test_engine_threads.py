"""One model shared (issue 10, the public contract): calls from several threads and streams consumed in any
order give exactly what the same calls give one after another, on the CPU and on the GPU; bad
arguments are TffeduErrors that leave the engine as it was."""
import threading

import numpy as np
import pytest

import tffedu.engine
from tffedu.engine import engine_of
from tffedu.errors import TffeduError
from hf_models import tiny_qwen3, write_gguf


@pytest.fixture(scope="module", params=["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def model(request, tmp_path_factory):
    hf = tiny_qwen3(hidden=64, heads=4, kv_heads=2, seed=21, std=0.08)
    path = write_gguf(hf, tmp_path_factory.mktemp("thr") / "m.gguf", "F32")
    return tffedu.engine.load(path, device=request.param, n_ctx=256)


def jobs(n, seed):
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        prompt = rng.integers(0, 400, rng.integers(3, 30)).tolist()
        kw = dict(max_new_tokens=int(rng.integers(4, 14)), ignore_eos=True)
        if i % 2:
            kw.update(temperature=0.8, top_k=30, seed=int(rng.integers(1000)))
        out.append((prompt, kw))
    return out


def run_threads(n_threads, work):
    errors = []

    def guard(fn):
        def go(*a):
            try:
                fn(*a)
            except BaseException as e:     # a thread's exception would vanish otherwise
                errors.append(e)
        return go
    ts = [threading.Thread(target=guard(work), args=(t,)) for t in range(n_threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    assert not errors, errors


def test_threads_equal_serial(model):
    """Every round gives the serial tokens; in at least one of three rounds the threads' requests
    also share a step (whether they meet in one is up to the OS scheduler: a fast GPU can finish a
    request before the next thread submits)."""
    js = jobs(12, 0)
    serial = [model.generate(p, **kw).tokens for p, kw in js]
    shared = []
    for _ in range(3):
        got = [None] * len(js)
        steps0 = len(engine_of(model).history)

        def work(t):
            for i in range(t, len(js), 4):
                got[i] = model.generate(js[i][0], **js[i][1]).tokens
        run_threads(4, work)
        assert got == serial
        assert not engine_of(model).busy
        shared = [sids for kind, sids, _ in engine_of(model).history[steps0:] if len(sids) > 1]
        if shared:
            break
    assert shared, "the threads' requests never shared a step"


def test_threads_mix_batch_stream_and_logits(model):
    js = jobs(6, 1)
    alone = [model.generate(p, **kw) for p, kw in js]
    ref_logits = model.logits(js[0][0])
    got = {}

    def work(t):
        p, kw = js[t]
        if t % 3 == 0:
            got[t] = model.generate_batch([p], **kw)[0].tokens
        elif t % 3 == 1:
            got[t] = "".join(model.stream(p, **kw))
        else:
            got[t] = model.logits(p)
    run_threads(6, work)
    for t in range(6):
        p, kw = js[t]
        if t % 3 == 0:
            assert got[t] == alone[t].tokens
        elif t % 3 == 1:
            assert got[t] == alone[t].text
        else:
            np.testing.assert_allclose(got[t], model.logits(p), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(model.logits(js[0][0]), ref_logits, rtol=1e-6, atol=1e-6)


def test_interleaved_streams_lose_nothing(model):
    js = jobs(3, 2)
    refs = [model.generate(p, **kw).text for p, kw in js]
    streams = [model.stream(p, **kw) for p, kw in js]
    pieces = [[] for _ in js]
    live = list(range(len(js)))
    rng = np.random.default_rng(3)
    while live:                                     # consume them in a random order
        i = live[rng.integers(len(live))]
        try:
            pieces[i].append(next(streams[i]))
        except StopIteration:
            live.remove(i)
    assert ["".join(p) for p in pieces] == refs
    assert not engine_of(model).busy


BAD = [dict(prompt=None), dict(prompt=123), dict(prompt=["a"]), dict(prompt=[2 ** 31]), dict(prompt=[1.5, 2]),
       dict(prompt=[True, 3]), dict(prompt=b"hello"), dict(prompt=[]), dict(prompt=[-1]),
       dict(prompt=[1, 2], stop=5), dict(prompt=[1, 2], stop=[""]), dict(prompt=[1, 2], max_new_tokens="3"),
       dict(prompt=[1, 2], max_new_tokens=-1), dict(prompt=[1, 2], top_k=1.5), dict(prompt=[1, 2], seed="x"),
       dict(prompt=[1, 2], temperature=float("nan")), dict(prompt=[1, 2], top_p=2.0),
       dict(prompt=[1, 2], repetition_penalty=0.0), dict(prompt=[1, 2], max_tokens=3)]


@pytest.mark.parametrize("kw", BAD, ids=[repr(k)[:60] for k in BAD])
def test_bad_arguments_are_tffedu_errors(model, kw):
    kw = dict(kw)
    prompt = kw.pop("prompt")
    for call in (lambda: model.generate(prompt, **kw), lambda: model.generate_batch([prompt], **kw),
                 lambda: list(model.stream(prompt, **{"max_new_tokens": 4, **kw}))):
        with pytest.raises(TffeduError):
            call()
    eng = engine_of(model)
    assert not eng.busy and eng.cache.n_free_pages == eng.cache.num_pages


def test_numpy_integers_do_not_wrap_around(model, monkeypatch):
    """numpy integers wrap around where Python's do not: 2**63 - 1 new tokens is more than the context
    (not 2 + 2**63 - 1 < 0, a request that passes the check), and 2**59 pages of 32 tokens more than a
    cache may hold (not 2**64 = 0 tokens, then a cache of 2**59 pages)."""
    from tffedu.engine import Engine
    from tffedu.errors import ContextOverflowError, EngineError
    eng = engine_of(model)
    for call in (lambda: eng.check([1, 2], np.int64(2**63 - 1)),
                 lambda: eng.cancel(eng.add([1, 2], max_new_tokens=np.int64(2**63 - 1)))):
        with pytest.raises(ContextOverflowError):
            call()
    assert not eng.busy
    monkeypatch.setattr(tffedu.engine, "KVCache", lambda *a, **kw: pytest.fail(f"a cache of {a[3]} pages"))
    for pages, size in ((np.uint64(2**63), 32), (np.int64(2**59), np.int64(32))):
        with pytest.raises(EngineError, match="more than"):
            Engine(model, num_pages=pages, page_size=size)


def test_engine_add_takes_a_stop_string_whole(model):
    "Engine.add(stops='ab'): one stop string, as generate(stop='ab') takes it, not 'a' and 'b'."
    from tffedu.errors import SamplingError
    eng = engine_of(model)
    req = eng.add([1, 2], max_new_tokens=2, stops="ab")
    eng.cancel(req)
    assert req.stops == ["ab"]
    for bad in ([""], 5, [None]):
        with pytest.raises(SamplingError, match="stop"):
            eng.add([1, 2], max_new_tokens=2, stops=bad)
    assert not eng.busy and eng.cache.n_free_pages == eng.cache.num_pages


def test_bad_prompt_lists(model):
    for prompts in ("abc", None, 5, [None], [[1, 2], "x", 3]):
        with pytest.raises(TffeduError):
            model.generate_batch(prompts, max_new_tokens=2)


def test_tiny_temperature_is_greedy(model):
    "temperature 5e-324 overflows logits / T: its limit, greedy, not an IndexError."
    p = jobs(1, 4)[0][0]
    assert model.generate(p, max_new_tokens=6, temperature=5e-324, seed=1).tokens == \
           model.generate(p, max_new_tokens=6).tokens


def test_engine_and_load_sizes_are_bounded(model, tmp_path):
    "A cache of a billion pages or a context past the trained one is an error at once, not a hang."
    from tffedu.engine import Engine
    from tffedu.errors import EngineError, ModelError
    from timing import Stopwatch
    clock = Stopwatch()
    with pytest.raises(EngineError, match="pages"):
        Engine(model, num_pages=10 ** 9)
    with pytest.raises(ModelError, match="n_ctx"):
        tffedu.engine.load(model.source.path, n_ctx=10 ** 9)
    assert not (slow := clock.over(5)), slow
