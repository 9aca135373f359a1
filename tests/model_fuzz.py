"""Fuzzer for the layers above the byte reader (issue 10): metadata types and ranges, config
arithmetic, tokenizer fields, chat templates and messages, Hugging Face folders.

Run by tests/test_model_fuzz.py in a subprocess whose address space is capped at its size after
start-up plus 1 GiB (RLIMIT_AS), so any single allocation over 1 GB fails. Every case must either
load or raise a TffeduError (anything else is a failure), in under a second of CPU. Seeds: small models
written by gguf-py and by transformers' save_pretrained (made by the test, passed as a folder).

    python tests/model_fuzz.py SEED_FOLDER [--scale 1.0] [--seed 0]   -> one JSON summary line
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import pathlib
import random
import resource
import shutil
import struct
import sys
import time
import traceback

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from gguf_build import build, read_model  # noqa: E402
from timing import Stopwatch  # noqa: E402
from tffedu import tokenizer as tk  # noqa: E402
from tffedu.config import config_from_gguf, config_from_hf, check_tensors, weight_shapes  # noqa: E402
from tffedu.errors import TffeduError  # noqa: E402
from tffedu.gguf import ValueType as V  # noqa: E402
from tffedu.modelfile import inspect_model, open_model  # noqa: E402
from tffedu.models import create  # noqa: E402
from tffedu.tokenizer import load_tokenizer, render_chat_template  # noqa: E402

MAX_CASE_S = 1.0

INTS = [0, 1, -1, 2, 3, 4, 7, 8, 16, 31, 32, 48, 63, 64, 96, 128, 255, 1000, 65535, 65536,
        10**5, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**36, 2**53 + 1, 2**63 - 1, -2**31, -2**63]
FLOATS = [0.0, -0.0, 1e-6, 1e-5, 0.5, 1.0, 2.0, 1e4, 1e6, 1e30, 1e300, 5e-324, -1.0,
          float("nan"), float("inf"), float("-inf")]
STRINGS = ["", "x", "llama", "qwen3", "gpt2", "qwen2", "smollm", "linear", "yarn", "none",
           "default", "9", "1e6", "<|im_end|>", "ü" * 300, "a b", " ", "\x00"]


class Fuzz:
    "Runs cases, checks what each raised and how long it took; counts per domain."

    def __init__(self, rng: random.Random):
        self.rng, self.stats, self.failures, self.slowest = rng, {}, [], (0.0, "")

    def case(self, domain: str, what: str, fn):
        s = self.stats.setdefault(domain, {"cases": 0, "accepted": 0, "rejected": {}})
        s["cases"] += 1
        clock = Stopwatch()
        try:
            fn()
            s["accepted"] += 1
        except TffeduError as e:
            name = type(e).__name__
            s["rejected"][name] = s["rejected"].get(name, 0) + 1
            if not str(e):
                self.failures.append(f"{domain}: {what}: {name} without a message")
        except BaseException as e:   # noqa: BLE001 (any other exception is what we look for)
            if isinstance(e, KeyboardInterrupt):
                raise
            tb = traceback.format_exc().strip().splitlines()
            self.failures.append(f"{domain}: {what}: {type(e).__name__}: {str(e)[:200]} "
                                 f"({tb[-3].strip() if len(tb) > 2 else ''})")
        if clock.cpu > self.slowest[0]:
            self.slowest = (clock.cpu, f"{domain}: {what}")
        if slow := clock.over(MAX_CASE_S):
            self.failures.append(f"{domain}: {what}: {slow}")

    # --- random values -----------------------------------------------------------------------
    def value(self, like=None):
        "A random metadata value and its GGUF type: scalars of every type, strings, arrays."
        r = self.rng
        kind = r.choice(["int", "int", "int", "float", "str", "bool", "array"])
        if like is not None and r.random() < 0.3 and isinstance(like, int) and not isinstance(like, bool):
            v = like + r.choice([-1, 1, like, -like, 2 * like + 1])
            v = max(min(v, 2**64 - 1), -2**63)      # what a GGUF integer can hold
            return v, _int_type(v, r)
        if kind == "int":
            v = r.choice(INTS)
            return v, _int_type(v, r)
        if kind == "float":
            return r.choice(FLOATS), r.choice([V.FLOAT32, V.FLOAT64])
        if kind == "str":
            return r.choice(STRINGS), V.STRING
        if kind == "bool":
            return r.random() < 0.5, V.BOOL
        shape = r.choice(["uniform", "ragged", "empty", "strings", "nested", "floats", "bools"])
        n = r.choice([1, 2, 3, 30])
        if shape == "uniform":
            return np.full(n, r.choice([1, 2, 4, 64]), np.uint32), V.ARRAY
        if shape == "ragged":
            return np.array([r.choice([1, 2, 4, 64]) for _ in range(n)], np.int32), V.ARRAY
        if shape == "empty":
            return np.zeros(0, np.int32), V.ARRAY
        if shape == "strings":
            return [r.choice(STRINGS) for _ in range(n)], V.ARRAY
        if shape == "floats":
            with np.errstate(over="ignore"):
                return np.array([r.choice(FLOATS) for _ in range(n)], np.float32), V.ARRAY
        if shape == "bools":
            return np.array([r.random() < 0.5 for _ in range(n)]), V.ARRAY
        return [np.array([1, 2], np.int32), np.array([3], np.int32)], V.ARRAY

    def json_value(self, depth=0):
        r = self.rng
        k = r.choice(["int", "int", "float", "str", "bool", "null", "list", "dict"] if depth < 3 else
                     ["int", "float", "str", "bool", "null"])
        if k == "int":
            return r.choice(INTS + [10**9, 10**30, -(10**30)])
        if k == "float":
            return r.choice([0.0, 1e-6, 2.5, 1e300, -1.5])
        if k == "str":
            return r.choice(STRINGS)
        if k == "bool":
            return r.random() < 0.5
        if k == "null":
            return None
        if k == "list":
            return [self.json_value(depth + 1) for _ in range(r.choice([0, 1, 2, 3]))]
        return {r.choice(STRINGS) or "k": self.json_value(depth + 1) for _ in range(r.choice([0, 1, 2]))}


def _int_type(v: int, r: random.Random) -> V:
    fits = [t for t, (lo, hi) in {
        V.UINT8: (0, 255), V.INT8: (-128, 127), V.UINT16: (0, 65535), V.INT16: (-32768, 32767),
        V.UINT32: (0, 2**32 - 1), V.INT32: (-2**31, 2**31 - 1), V.UINT64: (0, 2**64 - 1),
        V.INT64: (-2**63, 2**63 - 1)}.items() if lo <= v <= hi]
    return r.choice(fits) if fits else (V.UINT64 if v > 0 else V.INT64)


def json_paths(x, path=()):
    "Every path into a JSON tree (dict keys and list indices)."
    yield path
    if isinstance(x, dict):
        for k, v in x.items():
            yield from json_paths(v, path + (k,))
    elif isinstance(x, list):
        for i, v in enumerate(x[:50]):    # long lists (vocabularies): their first entries
            yield from json_paths(v, path + (i,))


def mutate_json(fz: Fuzz, doc, n_edits: int):
    doc = copy.deepcopy(doc)
    for _ in range(n_edits):
        paths = [p for p in json_paths(doc) if p]
        if not paths:
            return fz.json_value()
        p = fz.rng.choice(paths)
        parent = doc
        for k in p[:-1]:
            parent = parent[k]
        if fz.rng.random() < 0.25 and isinstance(parent, dict):
            del parent[p[-1]]
        else:
            parent[p[-1]] = fz.json_value()
    return doc


# --- domain 1: GGUF metadata and tensors ---------------------------------------------------------
def gguf_cases(fz: Fuzz, seed_path: pathlib.Path, work: pathlib.Path, n: int):
    meta0, types0, tensors0 = read_model(seed_path)
    arch = meta0["general.architecture"]
    config_keys = [k for k in meta0 if k.startswith(arch + ".")] + [
        f"{arch}.rope.dimension_count", f"{arch}.rope.scaling.type", f"{arch}.rope.scaling.factor",
        f"{arch}.attention.key_length", "general.architecture"]
    tok_keys = [k for k in meta0 if k.startswith("tokenizer.")] + [
        "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.eot_token_id"]
    path = work / f"case-{arch}.gguf"
    r = fz.rng
    for i in range(n):
        meta, types, tensors = dict(meta0), dict(types0), dict(tensors0)
        edits = []
        for _ in range(r.choice([1, 1, 2, 3])):
            op = r.random()
            if op < 0.45:
                k = r.choice(config_keys)
                v, t = fz.value(meta.get(k))
                meta[k], types[k] = v, t
                edits.append(f"{k}={_short(v)}:{t.name}")
            elif op < 0.7:
                k = r.choice(tok_keys)
                v, t = tokenizer_value(fz, k, meta0)
                meta[k], types[k] = v, t
                edits.append(f"{k}={_short(v)}:{t.name}")
            elif op < 0.8:
                k = r.choice(list(meta))
                meta.pop(k)
                types.pop(k)
                edits.append(f"del {k}")
            else:
                edits.append(mutate_tensors(fz, tensors))
        data = build(meta, types, tensors)
        what = f"{arch} #{i}: {'; '.join(edits)}"

        def run():
            path.write_bytes(data)
            steps(lambda: inspect_model(path), lambda: build_model(path), lambda: use_tokenizer(path))
        fz.case("gguf: metadata, tokenizer keys, tensors", what, run)


def steps(*fns):
    "Run every step; re-raise the first non-TffeduError if any (a bug), else the first TffeduError."
    errors = []
    for fn in fns:
        try:
            fn()
        except BaseException as e:   # noqa: BLE001
            if isinstance(e, KeyboardInterrupt):
                raise
            errors.append(e)
    bugs = [e for e in errors if not isinstance(e, TffeduError)]
    if bugs or errors:
        raise (bugs or errors)[0]


def build_model(path):
    "open_model, and for a file it accepts, the graph of its architecture (weights all present)."
    with open_model(path) as m:
        dtypes = {n: m.tensor(n).dtype for n in m.tensor_names}
        g = create(m.config, 16, dtypes).build_graph(2)
        need = {n.name for n in g.nodes if n.kind == "weight"}
        missing = need - set(m.tensor_names)
        assert not missing, f"open_model accepted a file without {sorted(missing)[:3]}"
        for n in need:   # and the graph's weight shapes are the file's
            assert tuple(g[n].shape) == tuple(m.shape(n)), (n, g[n].shape, m.shape(n))


def use_tokenizer(path):
    tok = load_tokenizer(path)
    tok.encode("Hello wörld, 你好 😀 <|im_end|>", missing="drop")
    tok.decode(list(range(min(tok.vocab_size, 50))))
    if tok.chat_template:
        tok.apply_chat_template([{"role": "user", "content": "hi"}])


def tokenizer_value(fz: Fuzz, key: str, meta0: dict):
    r = fz.rng
    if key == "tokenizer.ggml.tokens" and r.random() < 0.6:
        toks = list(meta0[key])
        choice = r.choice(["short", "ints", "nested", "dupes", "long", "empty"])
        if choice == "short":
            return toks[: r.choice([0, 1, 100, len(toks) - 1])], V.ARRAY
        if choice == "ints":
            return np.arange(len(toks), dtype=np.int32), V.ARRAY
        if choice == "nested":
            return [[t] for t in toks[:3]], V.ARRAY
        if choice == "dupes":
            return [toks[0]] * len(toks), V.ARRAY
        if choice == "long":
            return toks[:-1] + ["x" * 100_000], V.ARRAY
        return [], V.ARRAY
    if key == "tokenizer.ggml.token_type" and r.random() < 0.6:
        n = len(meta0["tokenizer.ggml.tokens"])
        choice = r.choice(["range", "short", "floats", "allcontrol", "neg"])
        if choice == "range":
            return np.full(n, r.choice([7, 100, 2**31 - 1]), np.int32), V.ARRAY
        if choice == "short":
            return np.ones(n - 1, np.int32), V.ARRAY
        if choice == "floats":
            return np.ones(n, np.float32), V.ARRAY
        if choice == "allcontrol":
            return np.full(n, 3, np.int32), V.ARRAY
        return np.full(n, -1, np.int32), V.ARRAY
    if key == "tokenizer.ggml.merges" and r.random() < 0.6:
        merges = list(meta0[key])
        choice = r.choice(["ints", "nospace", "unknown", "cut"])
        if choice == "ints":
            return np.arange(10, dtype=np.int32), V.ARRAY
        if choice == "nospace":
            return merges[:5] + ["ab"], V.ARRAY
        if choice == "unknown":
            return merges + ["zz qq", "Ġ Ġ"], V.ARRAY
        return merges[: len(merges) // 2], V.ARRAY
    if key == "tokenizer.chat_template" and r.random() < 0.6:
        return random_template(fz), V.STRING
    return fz.value(meta0.get(key) if isinstance(meta0.get(key), int) else None)


def mutate_tensors(fz: Fuzz, tensors: dict) -> str:
    r = fz.rng
    name = r.choice(list(tensors))
    t, shape, raw = tensors[name]
    op = r.choice(["drop", "transpose", "reshape", "rename", "block", "type", "extra"])
    if op == "drop":
        del tensors[name]
    elif op == "transpose" and len(shape) == 2:
        tensors[name] = (t, (shape[1], shape[0]), raw)
    elif op == "reshape" and len(shape) == 2 and shape[0] % 2 == 0:
        tensors[name] = (t, (shape[0] // 2, shape[1] * 2), raw)
    elif op == "rename":
        tensors[name.replace("blk.0.", "blk.7.").replace("blk.1.", "blk.99999.")] = tensors.pop(name)
    elif op == "block":
        for n in [n for n in tensors if n.startswith("blk.1.")]:
            tensors[n.replace("blk.1.", "blk.2.")] = tensors[n]
    elif op == "type" and t == 0:          # F32 -> F16 on half the bytes: a consistent F16 tensor
        tensors[name] = (1, shape, raw[: len(raw) // 2])
    elif op == "type":
        tensors[name] = (r.choice([16, 23, 99]), shape, raw)
    else:
        tensors["rope_freqs.weight" if r.random() < 0.5 else "blk.0.extra.weight"] = (0, (4,), bytes(16))
    return f"tensor {op} {name}"


# --- domain 2: config arithmetic -------------------------------------------------------------
def config_cases(fz: Fuzz, n: int):
    r = fz.rng
    fields = ["block_count", "embedding_length", "feed_forward_length", "attention.head_count",
              "attention.head_count_kv", "attention.key_length", "attention.value_length",
              "context_length", "attention.layer_norm_rms_epsilon", "rope.freq_base",
              "rope.dimension_count", "vocab_size", "rope.scaling.type", "rope.scaling.factor"]
    hf_fields = ["num_hidden_layers", "hidden_size", "intermediate_size", "num_attention_heads",
                 "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps",
                 "rope_theta", "vocab_size", "tie_word_embeddings", "rope_scaling",
                 "rope_parameters", "model_type"]
    base_hf = {"model_type": "qwen3", "num_hidden_layers": 2, "hidden_size": 64,
               "intermediate_size": 96, "num_attention_heads": 4, "num_key_value_heads": 2,
               "head_dim": 16, "vocab_size": 100, "rms_norm_eps": 1e-6, "rope_theta": 1e6}
    for i in range(n):
        arch = r.choice(["llama", "qwen3"])
        meta = {"general.architecture": arch, f"{arch}.block_count": 2,
                f"{arch}.embedding_length": 64, f"{arch}.feed_forward_length": 96,
                f"{arch}.attention.head_count": 4, f"{arch}.attention.layer_norm_rms_epsilon": 1e-5}
        for _ in range(r.choice([1, 2, 3])):
            k = f"{arch}.{r.choice(fields)}"
            meta[k] = fz.value(meta.get(k))[0]
        shapes = {"token_embd.weight": (r.choice([1, 100, 2**20]), 64)}

        def gguf_case():
            c = config_from_gguf(meta, shapes)
            if c.n_layer <= 64:
                want = weight_shapes(c)
                check_tensors(c, want)                        # its own shapes always pass
                bad = dict(want)
                k = r.choice(list(bad))
                bad[k] = tuple(d + 1 for d in bad[k])
                try:
                    check_tensors(c, bad)
                except TffeduError:
                    return
                raise AssertionError(f"check_tensors accepted a wrong shape for {k}")
        fz.case("config arithmetic (GGUF keys -> ModelConfig)", _short(meta, 300), gguf_case)

        cfg = dict(base_hf)
        for _ in range(r.choice([1, 2, 3])):
            cfg[r.choice(hf_fields)] = fz.json_value()
        if r.random() < 0.05:
            cfg = r.choice([[cfg], "config", 7, None])
        fz.case("config arithmetic (config.json -> ModelConfig)", _short(cfg, 300),
                lambda: config_from_hf(cfg))


# --- domain 3: HF folders (config.json, safetensors headers, tokenizer files) -------------------
def hf_cases(fz: Fuzz, seed: pathlib.Path, work: pathlib.Path, n: int):
    r = fz.rng
    cfg0 = json.loads((seed / "config.json").read_text())
    st0 = (seed / "model.safetensors").read_bytes()
    hlen = struct.unpack_from("<Q", st0)[0]
    header0 = json.loads(st0[8:8 + hlen])
    tok_files = {n: (seed / n).read_bytes() for n in ("tokenizer.json", "tokenizer_config.json",
                                                       "generation_config.json") if (seed / n).exists()}
    folder = work / f"hf-{seed.name}"
    for i in range(n):
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        files = dict(tok_files)
        files["config.json"] = json.dumps(cfg0).encode()
        st = st0
        what = []
        target = r.choice(["config", "config", "safetensors", "tokenizer.json", "tokenizer_config.json",
                           "generation_config.json", "bytes", "chat_template.jinja"])
        if target == "config":
            files["config.json"] = json.dumps(mutate_json(fz, cfg0, r.choice([1, 2]))).encode()
            what.append(f"config.json {files['config.json'][:200]!r}")
        elif target == "safetensors":
            header = mutate_safetensors_header(fz, header0)
            h = json.dumps(header).encode()
            h += b" " * (-len(h) % 8)
            st = struct.pack("<Q", len(h)) + h + st0[8 + hlen:]
            what.append(f"safetensors header {h[:200]!r}")
        elif target in files and target.endswith(".json"):
            doc = json.loads(files[target])
            files[target] = json.dumps(mutate_json(fz, doc, r.choice([1, 2, 3]))).encode()
            what.append(f"{target} mutated")
        elif target == "chat_template.jinja":
            files[target] = random_template(fz).encode()
            what.append(f"{target} {files[target][:120]!r}")
        else:
            name = r.choice(list(files))
            b = files[name]
            files[name] = r.choice([b[: r.randrange(len(b) + 1)], b"\xff\xfe" + b, b"", b"[" * 10_000,
                                    b.replace(b"{", b"[", 1)])
            what.append(f"{name} bytes damaged")
        for name, b in files.items():
            (folder / name).write_bytes(b)
        (folder / "model.safetensors").write_bytes(st)

        def run():
            steps(lambda: build_model(folder), lambda: use_tokenizer(folder))
        fz.case(f"HF folders ({seed.name})", "; ".join(what), run)


def mutate_safetensors_header(fz: Fuzz, header0: dict) -> dict:
    r = fz.rng
    header = copy.deepcopy(header0)
    name = r.choice([k for k in header if k != "__metadata__"])
    e = header[name]
    op = r.choice(["shape", "transpose", "dtype", "offsets", "drop", "rename", "value"])
    if op == "shape":
        e["shape"] = [d * 2 for d in e["shape"]]
    elif op == "transpose" and len(e["shape"]) == 2:
        e["shape"] = e["shape"][::-1]
    elif op == "dtype":
        e["dtype"] = r.choice(["F16", "BF16", "I8", "U8", "F64", "F8_E4M3", "bf16"])
    elif op == "offsets":
        e["data_offsets"] = [e["data_offsets"][0] + r.choice([-2, 1, 8]), e["data_offsets"][1]]
    elif op == "drop":
        del header[name]
    elif op == "rename":
        header[name.replace("layers.0.", "layers.9.")] = header.pop(name)
    else:
        header[name] = fz.json_value()
    return header


# --- domain 4: chat templates and messages -------------------------------------------------------
FRAGMENTS = [
    "{{ 'ab' * N }}", "{{ [1, 2] * N }}", "{{ N ** M }}", "{{ N * M * N * M }}",
    "{% for i in range(N) %}{% for j in range(M) %}{% endfor %}{% endfor %}",
    "{% for i in range(N) %}{% for j in range(M) %}{{ i }}{% endfor %}{% endfor %}",
    "{{ 'x'.ljust(N) }}", "{{ 'x' | center(N) }}", "{{ ('a\\n' * N) | indent(M) }}",
    "{{ '{:>N}'.format('x') }}", "{{ '%Nd' % 1 }}", "{{ messages | tojson(indent=N) }}",
    "{% set ns = namespace(s='x') %}{% for i in range(N) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s | length }}",
    "{% set ns = namespace(s=[0]) %}{% for i in range(N) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
    "{{ messages[N] }}", "{{ messages[0]['content'] | replace('h', 'x' * N) }}",
    "{{ raise_exception('no: ' ~ N) }}", "{{ 1 / N }}", "{{ 1 // N }}", "{{ N % M }}",
    "{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(N) }}",
    "{{ (range(N) | list) | join(',') }}", "{{ messages * N }}", "{{ 'x' ~ N }}",
    "{{ (N | string) * M }}", "{{ ''.join(['ab'] * N) }}", "{{ messages | map(attribute='role') | join }}",
    "{{ messages.__class__ }}", "{{ x.y.z }}", "{{ cycler(1, 2).next() }}", "{% for %}", "{{",
    "{{ lipsum(N) }}", "{{ ('\\t' * N).expandtabs(M) }}", "{{ 'abc' | truncate(N) }}",
    "{{ (range(M) | list) | batch(N) | list | length }}", "{{ messages | selectattr('role') | list }}",
    "{{ strftime_now('%Y' * N) }}", "{{ 'x' | wordwrap(N) }}", "{{ messages[0].content | upper }}",
    "{% for m in messages %}{{ m.role }}: {{ m.content }}{% endfor %}",
    "{% if add_generation_prompt %}<|im_start|>assistant{% endif %}",
]
NUMBERS = [0, 1, 2, 7, 64, 100, 1000, 65536, 65537, 100000, 10**6, 10**9, 10**18, -1]


def random_template(fz: Fuzz) -> str:
    r = fz.rng
    out = []
    for _ in range(r.choice([1, 2, 3])):
        f = r.choice(FRAGMENTS)
        out.append(f.replace("N", str(r.choice(NUMBERS))).replace("M", str(r.choice(NUMBERS))))
    return "".join(out)


def random_messages(fz: Fuzz):
    r = fz.rng
    if r.random() < 0.1:
        return r.choice([None, "hi", 5, {"role": "user"}, [], [[]], ["x"]])
    msgs = []
    for _ in range(r.choice([1, 2, 3])):
        m = {"role": r.choice(["user", "assistant", "system", None, 5, ["user"], ""]),
             "content": r.choice(["hi", "", "x" * 10_000, None, 5, 1.5, ["part"],
                                  [{"type": "text", "text": "hi"}], {"a": 1}, b"bytes"])}
        if r.random() < 0.2:
            m["reasoning_content"] = r.choice(["think", None, 3])
        msgs.append(m)
    return msgs


def template_cases(fz: Fuzz, real_templates: list[str], n: int):
    r = fz.rng
    for i in range(n):
        if r.random() < 0.6:
            t, msgs = random_template(fz), [{"role": "user", "content": "hi"}]
        else:
            t, msgs = r.choice(real_templates), random_messages(fz)
        fz.case("chat templates and messages", f"{t[:150]!r} on {_short(msgs, 120)}",
                lambda: render_chat_template(t, msgs, add_generation_prompt=r.random() < 0.5,
                                             enable_thinking=r.random() < 0.5))


def _short(v, n=80):
    s = repr(v.tolist() if isinstance(v, np.ndarray) and v.size < 20 else v)
    return s if len(s) <= n else s[:n] + "..."


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("seeds", type=pathlib.Path)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-limit", action="store_true")
    a = ap.parse_args()
    tk.TEMPLATE_SECONDS = 0.2   # the deadline itself is tested in test_tokenizer_checks; keep CI short
    start_rss = _vm_hwm_mb()
    if not a.no_limit:          # any allocation over 1 GiB from here on fails (MemoryError: a failure)
        with open("/proc/self/statm") as f:
            vm = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        resource.setrlimit(resource.RLIMIT_AS, (vm + (1 << 30), resource.RLIM_INFINITY))
    fz = Fuzz(random.Random(a.seed))
    work = a.seeds / "work"
    work.mkdir(exist_ok=True)
    s = a.scale
    t0 = time.perf_counter()
    times = {}
    for name, fn in [
        ("gguf", lambda: [gguf_cases(fz, p, work, int(700 * s)) for p in sorted(a.seeds.glob("*.gguf"))]),
        ("config", lambda: config_cases(fz, int(2000 * s))),
        ("hf", lambda: [hf_cases(fz, p, work, int(350 * s)) for p in sorted(a.seeds.glob("hf-*")) if p.is_dir()]),
        ("templates", lambda: template_cases(
            fz, [(a.seeds / "qwen3.jinja").read_text(), (a.seeds / "simple.jinja").read_text()],
            int(500 * s))),
    ]:
        t = time.perf_counter()
        fn()
        times[name] = round(time.perf_counter() - t, 2)
    print(json.dumps({
        "stats": fz.stats, "failures": fz.failures[:20], "n_failures": len(fz.failures),
        "cases": sum(d["cases"] for d in fz.stats.values()),
        "slowest_cpu_s": round(fz.slowest[0], 4), "slowest": fz.slowest[1][:300],
        "seconds": round(time.perf_counter() - t0, 1), "seconds_per_domain": times,
        "peak_rss_mb": _vm_hwm_mb(), "start_rss_mb": start_rss, "address_space_limit": not a.no_limit}))


def _vm_hwm_mb() -> int:
    "Peak resident memory of this process (VmHWM: ru_maxrss would include the parent's, on Linux)."
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) // 1024 for line in f if line.startswith("VmHWM:"))


if __name__ == "__main__":
    main()
