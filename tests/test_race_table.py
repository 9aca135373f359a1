"""benchmarks/race.py's parsing and merging, offline: fixtures in the exact formats llama-bench
(-o json) and llama-batched-bench (--output-format jsonl, and its markdown table) print, written
from their source (tools/llama-bench/llama-bench.cpp, tools/batched-bench/batched-bench.cpp of the
peers' llama.cpp), and tffedu's rows with a faked bench / measure_decode. No GPU, no model."""
import importlib.util
import json
import pathlib
import types

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def race():
    spec = importlib.util.spec_from_file_location("race", ROOT / "benchmarks" / "race.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def llama_bench_test(n_prompt, n_gen, n_depth, avg_ts):
    "One object as llama-bench's json_printer writes it (its fields, in its order)."
    vals = dict(build_commit="0c1e570", build_number=1, cpu_info="AMD EPYC", gpu_info="NVIDIA H200",
                backends="CUDA", model_filename="/tmp/models/qwen3-8b.gguf",
                model_type="qwen3 8B Q8_0", model_size=8709519360, model_n_params=8190735360,
                n_batch=2048, n_ubatch=512, n_threads=16, cpu_mask="0x0", cpu_strict=False, poll=50,
                type_k="f16", type_v="f16", n_gpu_layers=99, n_cpu_moe=0, split_mode="layer",
                main_gpu=0, no_kv_offload=False, flash_attn=1, devices="auto", tensor_split="0.00",
                tensor_buft_overrides="none", load_mode="mmap", lazy_mode="none", embeddings=False,
                no_op_offload=0, no_host=False, repack=True, fit_target=0, fit_min_ctx=0,
                n_prompt=n_prompt, n_gen=n_gen, n_depth=n_depth, test_time="2026-12-01T12:00:00Z",
                avg_ns=123, stddev_ns=4, avg_ts=avg_ts, stddev_ts=1.5)
    lines = [f'    "{k}": {json.dumps(v)},' for k, v in vals.items()]
    lines += ['    "samples_ns": [ 1, 2, 3 ],', f'    "samples_ts": [ {avg_ts}, {avg_ts}, {avg_ts} ]']
    return "  {\n" + "\n".join(lines) + "\n  }"


def llama_bench_json(tests):
    return "[\n" + ",\n".join(llama_bench_test(*t) for t in tests) + "\n]\n"


SWEEP = {1: 237.1, 4: 740.25, 8: 1018.5, 16: 1852.0, 32: 3084.75}   # S_TG t/s per npl


def batched_jsonl():
    "llama-batched-bench --output-format jsonl's stdout: one LOG(...) line per npl, then \\n."
    fmt = ('{"n_kv_max": %d, "n_batch": %d, "n_ubatch": %d, "flash_attn": %d, "is_pp_shared": %d, '
           '"n_gpu_layers": %d, "n_threads": %u, "n_threads_batch": %u, "pp": %d, "tg": %d, "pl": %d, '
           '"n_kv": %d, "t_pp": %f, "speed_pp": %f, "t_tg": %f, "speed_tg": %f, "t": %f, "speed": %f}\n')
    out = ""
    for pl, s_tg in SWEEP.items():
        t_pp, t_tg = pl * 128 / 9000.0, pl * 128 / s_tg
        out += fmt % (40192, 2048, 512, 1, 0, 99, 16, 16, 128, 128, pl, pl * 256, t_pp, pl * 128 / t_pp,
                      t_tg, s_tg, t_pp + t_tg, pl * 256 / (t_pp + t_tg))
    return out + "\n"


def batched_md():
    "The default (md) stdout: header line, table head, one row per npl (the same LOG formats)."
    out = ("\nllama_batched_bench: n_kv_max = 40192, n_batch = 2048, n_ubatch = 512, flash_attn = 1, "
           "is_pp_shared = 0, is_tg_separate = 0, n_gpu_layers = 99, n_threads = 16, n_threads_batch = 16\n\n")
    out += "|%6s | %6s | %4s | %6s | %8s | %8s | %8s | %8s | %8s | %8s |\n" % (
        "PP", "TG", "B", "N_KV", "T_PP s", "S_PP t/s", "T_TG s", "S_TG t/s", "T s", "S t/s")
    out += "|%6s-|-%6s-|-%4s-|-%6s-|-%8s-|-%8s-|-%8s-|-%8s-|-%8s-|-%8s-|\n" % (
        "------", "------", "----", "------", "--------", "--------", "--------", "--------", "--------", "--------")
    for pl, s_tg in SWEEP.items():
        t_pp, t_tg = pl * 128 / 9000.0, pl * 128 / s_tg
        out += "|%6d | %6d | %4d | %6d | %8.3f | %8.2f | %8.3f | %8.2f | %8.3f | %8.2f |\n" % (
            128, 128, pl, pl * 256, t_pp, pl * 128 / t_pp, t_tg, s_tg, t_pp + t_tg, pl * 256 / (t_pp + t_tg))
    return out + "\n"


TF_8B = [dict(test="pp512", tps=9562.68, std=1, reps=3), dict(test="tg128", tps=278.24, std=1, reps=3),
         dict(test="tg128@d2048", tps=245.64, std=1, reps=3), dict(test="tg128 eager", tps=56.3, std=1, reps=3),
         dict(test="pp2048", tps=9000.0, std=1, reps=3)] + \
        [dict(test=f"batch{b}", tps=100.0 * b, batch=b, ms_per_step=10.0) for b in (1, 4, 8, 16)]   # no 32


def fake_out(d: pathlib.Path, batched: str):
    (d / "lc_qwen3-8b.json").write_text(llama_bench_json([(512, 0, 0, 10400.68), (2048, 0, 0, 9876.5),
                                                          (0, 128, 0, 242.21)]))
    (d / "lc_qwen3-8b_d2048.json").write_text(llama_bench_json([(0, 128, 2048, 232.83)]))
    (d / "lc_qwen3-8b_batched.jsonl").write_text(batched)
    (d / "tf_qwen3-8b.json").write_text(json.dumps(TF_8B))
    (d / "lc_qwen3-0.6b.json").write_text(llama_bench_json([(512, 0, 0, 39704.77), (0, 128, 0, 756.36)]))
    (d / "tf_qwen3-0.6b.json").write_text(json.dumps([dict(test="pp512", tps=19801.31), dict(test="tg128", tps=772.26)]))


def test_llama_bench_json(race, tmp_path):
    p = tmp_path / "lc.json"
    p.write_text(llama_bench_json([(512, 0, 0, 10.5), (2048, 0, 0, 9.5), (0, 128, 0, 2.5), (0, 128, 2048, 1.5)]))
    assert race.llama_rows(p) == {"pp512": 10.5, "pp2048": 9.5, "tg128": 2.5, "tg128@d2048": 1.5}
    text = p.read_text()                       # killed by its timeout mid-way: the whole tests it wrote
    p.write_text(text[:text.index('"n_prompt": 0,\n    "n_gen": 128,\n    "n_depth": 2048')])
    assert race.llama_rows(p) == {"pp512": 10.5, "pp2048": 9.5, "tg128": 2.5}


@pytest.mark.parametrize("fmt", [batched_jsonl, batched_md])
def test_llama_batched_rows(race, tmp_path, fmt):
    p = tmp_path / "b.jsonl"
    p.write_text(fmt())
    got = race.llama_batched_rows(p)
    assert got == pytest.approx({f"batch{b}": v for b, v in SWEEP.items()}, abs=0.006)


@pytest.mark.parametrize("fmt", [batched_jsonl, batched_md])
def test_table(race, tmp_path, capsys, fmt):
    fake_out(tmp_path, fmt())
    race.table(str(tmp_path))
    rows = json.loads((tmp_path / "vs_llamacpp.json").read_text())
    assert all(set(r) == {"model", "test", "tffedu_tps", "llamacpp_tps", "date"} for r in rows)
    got = {(r["model"], r["test"]): (r["tffedu_tps"], r["llamacpp_tps"]) for r in rows}
    want = {("qwen3-0.6b-q8_0", "pp512"): (19801.31, 39704.77), ("qwen3-0.6b-q8_0", "tg128"): (772.26, 756.36),
            ("qwen3-8b-q8_0", "pp512"): (9562.68, 10400.68), ("qwen3-8b-q8_0", "tg128"): (278.24, 242.21),
            ("qwen3-8b-q8_0", "tg128@d2048"): (245.64, 232.83), ("qwen3-8b-q8_0", "pp2048"): (9000.0, 9876.5)}
    want |= {("qwen3-8b-q8_0", f"batch{b}"): (100.0 * b, SWEEP[b]) for b in (1, 4, 8, 16)}
    assert got.keys() == want.keys()
    for k, (a, b) in want.items():
        assert got[k] == pytest.approx((a, b), abs=0.006), k
    sweep = json.loads((tmp_path / "batch_sweep.json").read_text())
    assert [s["batch"] for s in sweep] == [1, 4, 8, 16, 32]
    assert all(s["model"] == "qwen3-8b-q8_0" for s in sweep)
    s4 = sweep[1]
    assert s4["tffedu_tps"] == 400.0 and s4["tffedu_ms_per_step"] == 10.0
    assert s4["llamacpp_ms_per_step"] == pytest.approx(4 / SWEEP[4] * 1000, abs=1e-3)
    assert sweep[-1]["tffedu_tps"] is None and sweep[-1]["llamacpp_tps"] == pytest.approx(SWEEP[32], abs=0.006)
    out = capsys.readouterr().out
    assert "| qwen3-8b-q8_0 | batch16 | 1600.0 | 1852.0 | 0.86x |" in out
    assert "| qwen3-8b-q8_0 | pp2048 | 9000.0 | 9876.5 | 0.91x |" in out
    assert "| qwen3-8b-q8_0 | tg128 eager (no CUDA graphs) | 56.3 | | graphs 4.9x faster |" in out


def test_table_names_the_type(race, tmp_path):
    """A row names its file's type: make_gguf.py's Q8_0 files get -q8_0 (a name with hyphens of its own too:
    the 30B-A3B of issue 31), a file requantized by llama-quantize keeps the type in its name."""
    for name in ("qwen3-30b-a3b", "qwen3-8b-q4_k_m", "qwen3-0.6b"):
        (tmp_path / f"lc_{name}.json").write_text(llama_bench_json([(0, 128, 0, 100.0)]))
        (tmp_path / f"tf_{name}.json").write_text(json.dumps([dict(test="tg128", tps=150.0)]))
    race.table(str(tmp_path))
    rows = json.loads((tmp_path / "vs_llamacpp.json").read_text())
    assert sorted(r["model"] for r in rows) == ["qwen3-0.6b-q8_0", "qwen3-30b-a3b-q8_0", "qwen3-8b-q4_k_m"]


def test_tffedu_rows(race, monkeypatch):
    "The tests tffedu's side runs, in order, and the batch rows measure_decode's numbers make."
    from tffedu import cli, engine
    calls = []

    def bench(model, p=512, n=128, depth=0, reps=3, cuda_graphs=True):
        calls.append(("bench", p, n, depth, cuda_graphs))
        return ([dict(test=f"pp{p}", tps=1000.0)] if p else []) + \
               ([dict(test=f"tg{n}" + (f"@d{depth}" if depth else ""), tps=100.0)] if n else [])

    def measure_decode(model, prompts, batch_size, new_tokens=16):
        assert len(prompts) >= batch_size and len({tuple(p) for p in prompts[:batch_size]}) == batch_size
        assert all(len(p) == 128 and all(0 <= t < 1000 for t in p) for p in prompts)
        calls.append(("decode", batch_size, new_tokens))
        return 50.0 * batch_size

    monkeypatch.setattr(cli, "bench", bench)
    monkeypatch.setattr(engine, "measure_decode", measure_decode)
    def generate_batch(prompts, max_new_tokens, ignore_eos):
        assert max_new_tokens == 128 and ignore_eos and len(prompts) == 32
        calls.append(("generate_batch", len(prompts)))    # first tokens 1 ms apart, then 1 s of decode
        return [types.SimpleNamespace(tokens=[0] * 128, prefill_s=0.1 + i / 1000, decode_s=1.0)
                for i in range(len(prompts))]

    monkeypatch.setattr(cli, "bench", bench)
    monkeypatch.setattr(engine, "measure_decode", measure_decode)
    model = types.SimpleNamespace(config=types.SimpleNamespace(vocab_size=1000), generate_batch=generate_batch)
    rows = []
    race.tffedu_rows(model, (1, 4, 32), rows.append)
    assert [r["test"] for r in rows] == ["pp512", "tg128", "tg128@d2048", "tg128 eager", "pp2048",
                                         "batch1", "batch4", "batch32", "generate_batch32"]
    assert ("bench", 2048, 0, 0, True) in calls
    assert [c for c in calls if c[0] == "decode"] == [("decode", b, 128) for b in (1, 4, 32)]
    assert rows[-2]["ms_per_step"] == pytest.approx(32 / 1600.0 * 1000)
    assert calls.count(("generate_batch", 32)) == 2             # a warm-up call, then the timed one
    # 32 x 127 decode tokens from the first first token (0.1 s) to the last token (0.131 + 1 s)
    assert rows[-1]["tps"] == pytest.approx(32 * 127 / 1.031)
    rows.clear()
    race.tffedu_rows(model, (), rows.append)                 # no --batch: the tests as before
    assert [r["test"] for r in rows] == ["pp512", "tg128", "tg128@d2048", "tg128 eager"]
    rows.clear()
    race.tffedu_rows(model, (1, 4), rows.append, long=True)  # --long: the long-context rows alone
    assert [r["test"] for r in rows] == ["pp16384", "pp32768", "tg128@d8192", "tg32@d16384", "tg32@d32768"]


def test_table_long_rows(race, tmp_path, capsys):
    """tf_{model}_long.json joins llama-bench's -d 8192 / -d 16384,32768 / -p 16384,32768 rows under the
    model's name; a row of an 8-bit K/V cache (-ctk q8_0) is a test of its own, not the F16 one."""
    fake_out(tmp_path, batched_jsonl())
    (tmp_path / "lc_qwen3-8b_dlong_pp.json").write_text(llama_bench_json([(16384, 0, 0, 9807.0), (32768, 0, 0, 8000.5)]))
    (tmp_path / "lc_qwen3-8b_dlong_8k.json").write_text(llama_bench_json([(0, 128, 8192, 215.5)]))
    (tmp_path / "lc_qwen3-8b_dlong_32k.json").write_text(llama_bench_json([(0, 32, 16384, 185.0), (0, 32, 32768, 150.25)]))
    (tmp_path / "lc_qwen3-8b_dlong_q8.json").write_text(
        llama_bench_json([(0, 32, 16384, 190.5)]).replace('"type_k": "f16"', '"type_k": "q8_0"'))
    (tmp_path / "tf_qwen3-8b_long.json").write_text(json.dumps(
        [dict(test="pp16384", tps=21100.0), dict(test="pp32768", tps=16000.0), dict(test="tg128@d8192", tps=300.0),
         dict(test="tg32@d16384", tps=207.0), dict(test="tg32@d32768", tps=150.0),
         dict(test="tg32@d16384 kv q8_0", tps=230.0)]))
    race.table(str(tmp_path))
    rows = json.loads((tmp_path / "vs_llamacpp.json").read_text())
    got = {r["test"]: (r["tffedu_tps"], r["llamacpp_tps"]) for r in rows if r["model"] == "qwen3-8b-q8_0"}
    assert got["pp16384"] == (21100.0, 9807.0) and got["pp32768"] == (16000.0, 8000.5)
    assert got["tg128@d8192"] == (300.0, 215.5) and got["tg32@d16384"] == (207.0, 185.0)
    assert got["tg32@d32768"] == (150.0, 150.25) and got["tg128"] == (278.24, 242.21)
    assert got["tg32@d16384 kv q8_0"] == (230.0, 190.5)
    sweep = json.loads((tmp_path / "batch_sweep.json").read_text())
    assert [s["batch"] for s in sweep] == [1, 4, 8, 16, 32]            # the long file adds no sweep rows
    assert "| qwen3-8b-q8_0 | tg32@d16384 | 207.0 | 185.0 | 1.12x |" in capsys.readouterr().out
