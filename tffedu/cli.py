"""The `tffedu` command: generate, chat, inspect, bench, serve (hand-written: the application layer).

Every failure the user can cause (missing or malformed file, bad flag value) ends with a one-line
message on stderr and a non-zero exit status; generated text goes to stdout, diagnostics to stderr.
"""
import argparse
import math
import os
import sys
import time

from .errors import ModelError, TffeduError
from .factory import BACKENDS

KV_DTYPES = tuple(dict.fromkeys(t for b in BACKENDS.values() for t in b.kv_dtypes))   # every device's K/V types

__all__ = ["main"]


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line instead of argparse's usage dump
        help_cmd = " ".join(self.prog.split()[:2])   # "tffedu" or "tffedu generate"
        self.exit(2, f"tffedu: error: {message} (see {help_cmd} -h)\n")


_MAX_COUNT = 10**7   # token counts, top-k: far above any context; bounds what a typo can ask for


def _positive_int(s):
    v = int(s)
    if not 1 <= v <= _MAX_COUNT:
        raise argparse.ArgumentTypeError(f"must be in 1..{_MAX_COUNT}, got {v}")
    return v


def _nonneg_int(s):
    v = int(s)
    if not 0 <= v <= _MAX_COUNT:
        raise argparse.ArgumentTypeError(f"must be in 0..{_MAX_COUNT}, got {v}")
    return v


def _seed(s):
    v = int(s)
    if not 0 <= v < 2**64:
        raise argparse.ArgumentTypeError(f"must be in 0..2^64-1, got {v}")
    return v


def _nonneg_float(s):
    v = float(s)
    if not (v >= 0 and math.isfinite(v)):  # also rejects nan and inf
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {s}")
    return v


def _prob(s):
    v = float(s)
    if not 0 < v <= 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {s}")
    return v


def _spec(s):
    "--spec: prompt lookup or a draft model (chapter 16); the file itself is checked when it loads."
    if s != "ngram" and not (s.startswith("draft:") and len(s) > 6):
        raise argparse.ArgumentTypeError(f"must be ngram or draft:PATH, got {s!r}")
    return s


def _model_path(path):
    if path is not None:
        return path
    from .assets import default_model_path
    return str(default_model_path())


def _load(args):
    from .engine import engine_of, load   # the engine adds Model.stream / generate_batch
    model = load(_model_path(args.model), device=args.device, kv_dtype=args.kv_dtype,
                 n_ctx=getattr(args, "n_ctx", None))
    engine_of(model, max_batch=1)         # one conversation: a KV cache for one sequence
    return model


def _needs_tokenizer(model, args):
    if model.tokenizer is None:
        raise ModelError(f"{args.model}: the model file has no tokenizer, so it cannot take text")


def cmd_generate(args):
    model = _load(args)
    _needs_tokenizer(model, args)
    for piece in model.stream(args.prompt, max_new_tokens=args.n, temperature=args.temp,
                              top_k=args.top_k, top_p=args.top_p, seed=args.seed, speculative=args.spec):
        print(piece, end="", flush=True)
    print()


def cmd_inspect(args):
    from .config import SUPPORTED_ARCHS
    from .gguf import GGUFFile
    from .modelfile import detect_format, inspect_model, open_model
    path = _model_path(args.model)
    print(inspect_model(path), flush=True)
    # the report shows any well-formed file (vocabulary-only, other architectures); a file with
    # the weights of a model tffedu runs must also pass open_model's checks, or the status says so
    if detect_format(path) == "gguf":
        with GGUFFile(path) as f:
            arch = f.metadata.get("general.architecture")     # any value at all: a str is checked
            if not isinstance(arch, str) or arch not in SUPPORTED_ARCHS or \
                    not any(n.startswith("blk.") for n in f.tensors):
                return
    open_model(path).close()


def _read_line(prompt: str, turn: int):
    "One line of stdin as text (None at the end): bytes decoded as UTF-8, whatever the locale."
    print(prompt, end="", flush=True)
    line = sys.stdin.buffer.readline()
    if not line:
        return None
    try:
        return line.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError as e:
        raise TffeduError(f"stdin line {turn} is not valid UTF-8 (byte 0x{line[e.start]:02X} at "
                          f"offset {e.start})") from None


def cmd_chat(args):
    model = _load(args)
    _needs_tokenizer(model, args)
    tok = model.tokenizer
    hidden = {tok.decode([i]) for i in tok.eos_ids}        # end-of-turn markers are not shown
    extra = {} if args.think is None else {"enable_thinking": args.think}   # Qwen3's switch
    messages = [{"role": "system", "content": args.system}] if args.system else []
    print("tffedu chat: empty line or Ctrl-D ends the conversation", file=sys.stderr)
    for turn in range(1, 1 << 62):
        user = _read_line("> ", turn)
        if user is None or not user.strip():
            break
        messages.append({"role": "user", "content": user})
        reply = _chat_turn(model, tok, messages, args, extra, hidden)
        if reply is not None:
            messages.append({"role": "assistant", "content": reply})


def _chat_turn(model, tok, messages, args, extra, hidden):
    """Stream one reply. While the conversation does not fit the context, the oldest turn (a user
    message and its reply) is forgotten, not the conversation; a message that cannot fit even
    alone is dropped with a one-line note (None), and the chat goes on. A reply cut by the
    length limit ends with " [...]" and a note on stderr that says how to raise it."""
    from .errors import ContextOverflowError
    while True:
        prompt = tok.apply_chat_template(messages, add_generation_prompt=True, **extra)
        reply = []
        try:
            pieces = model.stream(tok.encode(prompt, special=True), max_new_tokens=args.n,
                                  temperature=args.temp, seed=args.seed, speculative=args.spec)
            while True:
                try:
                    piece = next(pieces)
                except StopIteration as end:      # the generator returns its stop reason
                    stopped = end.value
                    break
                if piece not in hidden:
                    reply.append(piece)
                    print(piece, end="", flush=True)
        except ContextOverflowError as e:
            if reply:              # checked before the first token: cannot happen mid-reply
                raise
            first = 1 if messages[0]["role"] == "system" else 0
            if len(messages) - first <= 1:
                messages.pop()
                print(f"tffedu: this message does not fit ({e}); it was not sent", file=sys.stderr)
                return None
            del messages[first:first + 2]
            print("tffedu chat: the conversation no longer fits the context: the oldest turn is "
                  "forgotten", file=sys.stderr)
            continue
        if stopped == "length":
            print(" [...]", flush=True)
            print(f"tffedu chat: the reply was cut at {args.n} tokens (-n N raises the limit)",
                  file=sys.stderr)
        else:
            print()
        return "".join(reply).strip()


BENCH_FILL = 4096   # a tg test's context is written in prefill steps of at most this many tokens


def bench(model, p: int = 512, n: int = 128, depth: int = 0, reps: int = 3,
          cuda_graphs: bool = True) -> list[dict]:
    """llama-bench's two tests through the engine: `pp{p}` = prompt tokens per second of a fresh
    prefill of p tokens; `tg{n}` = n decode steps of one sequence after `depth` tokens of context,
    tokens per second. Each is run once to warm up (graphs planned, kernels compiled, decode steps
    captured), then `reps` times; rows {test, tps (mean), std, reps}."""
    import numpy as np
    from .engine import Engine
    from .errors import ContextOverflowError
    need = max(p + 1 if p else 0, depth + n + 2 if n else 0)   # a prompt and its token; depth + 1, then n + 1
    if need > model.n_ctx:
        raise ContextOverflowError(f"bench: -p {p}, -d {depth} and -n {n} need {need} tokens of context, the "
                                   f"model holds {model.n_ctx} (--n-ctx sets it, up to the trained "
                                   f"{model.config.context_length})")
    V = model.config.vocab_size
    rng = np.random.default_rng(0)
    # the pp prompt in one step (no chunked prefill); a deep tg context in chunks of BENCH_FILL, as
    # llama-bench fills it in batches: the activations of a 4,096-row step, not of a 32,769-row one
    eng = Engine(model, max_batch=1, token_budget=max(p, min(depth + 1, BENCH_FILL)), prefix_caching=False,
                 cuda_graphs=cuda_graphs)

    def prefill(n_tok):   # seconds of one prefill step of n_tok fresh random tokens
        req = eng.add(rng.integers(0, V, n_tok).tolist(), max_new_tokens=1, ignore_eos=True)
        t0 = time.perf_counter()
        eng.step()
        dt = time.perf_counter() - t0
        eng.cancel(req)
        return dt

    def decode():         # seconds of n decode steps at `depth` tokens of context
        req = eng.add(rng.integers(0, V, depth + 1).tolist(), max_new_tokens=n + 1, ignore_eos=True)
        while not req.n_generated:
            eng.step()                                 # the prefill gives the first token
        t0 = time.perf_counter()
        while not req.done:
            eng.step()
        return time.perf_counter() - t0

    rows = []
    for test, fn, count in ((f"pp{p}", lambda: prefill(p), p), (f"tg{n}", decode, n)):
        if count <= 0:
            continue
        fn()                                           # warm-up
        tps = np.array([count / fn() for _ in range(reps)])
        name = test + (f"@d{depth}" if depth and test.startswith("tg") else "")
        rows.append(dict(test=name, tps=float(tps.mean()), std=float(tps.std()), reps=reps))
    return rows


def cmd_bench(args):
    import json
    model = _load(args)
    rows = bench(model, args.p, args.n, args.depth, args.reps, cuda_graphs=not args.no_cuda_graphs)
    c = model.config
    size = sum(w.nbytes for w in model.weights.values())
    name = args.model or "default (SmolLM2-135M-Instruct Q4_1)"
    if args.json:
        print(json.dumps([dict(model=name, arch=c.arch, size_bytes=size, device=args.device, kv_dtype=model.kv_dtype, **r)
                          for r in rows]))
        return
    print("| model | size | backend | test | t/s |")
    print("| --- | ---: | --- | --- | ---: |")
    for r in rows:
        print(f"| {name} ({c.arch}, {c.n_layer} layers) | {size / 2**30:.2f} GiB | {args.device}"
              f"{'' if args.device == 'cpu' or not args.no_cuda_graphs else ' (eager)'} | {r['test']} | "
              f"{r['tps']:.2f} ± {r['std']:.2f} |")


def _port(s):
    v = int(s)
    if not 0 <= v <= 65535:
        raise argparse.ArgumentTypeError(f"must be in 0..65535, got {v}")
    return v


def cmd_serve(args):
    from . import engine
    from .serve import serve
    if args.kv_memory is not None:       # this process's default: it sizes the context at load too
        engine.KV_MEMORY = args.kv_memory
    model = engine.load(_model_path(args.model), device=args.device, n_ctx=args.n_ctx, kv_dtype=args.kv_dtype)
    page = f"http://{args.host}:{args.port}/" if args.port else "the address uvicorn prints below"  # 0: any free port
    print(f"tffedu serve: {model!r}; the chat page at {page}", file=sys.stderr, flush=True)
    pages = None if args.kv_tokens is None else -(-args.kv_tokens // 32)
    serve(model, args.host, args.port, max_queue=args.max_queue, max_batch=args.max_batch,
          page_size=32, num_pages=pages, speculative=args.spec, warm_up=False if args.no_warm_up else None)


def build_parser():
    p = _Parser(prog="tffedu", description="An educational LLM inference engine.")
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=_Parser)

    def model_args(sp):
        sp.add_argument("-m", "--model", help="GGUF file or HF folder (default: SmolLM2-135M-Instruct)")
        sp.add_argument("--device", type=str.lower, choices=["cpu", "cuda"], default="cpu")
        sp.add_argument("--kv-dtype", type=str.upper, choices=KV_DTYPES, default=None,
                        help="the K/V cache's type (default: F32 on the CPU, F16 on the GPU; Q8_0: 8-bit pages, about half of F16's bytes)")

    def spec_arg(sp):
        sp.add_argument("--spec", type=_spec, default=None, metavar="ngram|draft:PATH",
                        help="speculative decoding: prompt lookup, or a draft model of the same vocabulary")

    g = sub.add_parser("generate", help="continue a prompt")
    model_args(g)
    g.add_argument("prompt_pos", nargs="?", metavar="PROMPT", help="the prompt (or use -p)")
    g.add_argument("-p", "--prompt", default=None)
    g.add_argument("-n", type=_positive_int, default=64, help="new tokens (default 64)")
    g.add_argument("--temp", type=_nonneg_float, default=0.0, help="0 = greedy (default)")
    g.add_argument("--top-k", type=_nonneg_int, default=0)
    g.add_argument("--top-p", type=_prob, default=1.0)
    g.add_argument("--seed", type=_seed, default=None)
    spec_arg(g)
    g.set_defaults(fn=cmd_generate)

    c = sub.add_parser("chat", help="talk to the model with its chat template")
    model_args(c)
    c.add_argument("--system", default=None, help="system message")
    c.add_argument("-n", type=_positive_int, default=256, help="max new tokens per turn")
    c.add_argument("--temp", type=_nonneg_float, default=0.0)
    c.add_argument("--seed", type=_seed, default=None)
    c.add_argument("--think", action=argparse.BooleanOptionalAction, default=None,
                   help="Qwen3: turn thinking on or off (default: the template's)")
    spec_arg(c)
    c.set_defaults(fn=cmd_chat)

    i = sub.add_parser("inspect", help="metadata and tensor table of a model file")
    i.add_argument("model", nargs="?", metavar="MODEL",
                   help="GGUF file or HF folder (default: SmolLM2-135M-Instruct)")
    i.set_defaults(fn=cmd_inspect)

    b = sub.add_parser("bench", help="prefill and decode tokens/s")
    model_args(b)
    b.add_argument("-p", type=_nonneg_int, default=512, help="prompt tokens (default 512; 0: no prefill test)")
    b.add_argument("-n", type=_nonneg_int, default=128, help="decode tokens (default 128; 0: no decode test)")
    b.add_argument("-d", "--depth", type=_nonneg_int, default=0, help="context tokens before decoding (default 0)")
    b.add_argument("-r", "--reps", type=_positive_int, default=3, help="repetitions (default 3)")
    b.add_argument("--n-ctx", type=_positive_int, default=None,
                   help="context tokens (default: the trained context, at most 8192; a deep -d needs more)")
    b.add_argument("--no-cuda-graphs", action="store_true", help="launch decode steps eagerly (to compare)")
    b.add_argument("--json", action="store_true", help="one JSON list of rows on stdout")
    b.set_defaults(fn=cmd_bench)

    s = sub.add_parser("serve", help="the OpenAI HTTP API and a chat page (needs tffedu[serve])")
    model_args(s)
    s.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    s.add_argument("--port", type=_port, default=8000, help="TCP port (default 8000)")
    s.add_argument("--n-ctx", type=_positive_int, default=None,
                   help="context tokens (default: the trained context, or what of it fits in memory)")
    s.add_argument("--max-batch", type=_positive_int, default=None, help="sequences decoded together (default 64)")
    s.add_argument("--max-queue", type=_positive_int, default=256, help="requests that may wait; more get 503 (default 256)")
    s.add_argument("--kv-tokens", type=_positive_int, default=None,
                   help="tokens the KV cache holds, all sequences together (default: sized from memory)")
    s.add_argument("--kv-memory", type=_prob, default=None,
                   help="on a GPU, the share of the memory left after the weights for K/V (default 0.9)")
    s.add_argument("--no-warm-up", action="store_true",
                   help="on a GPU, skip running every step shape once before serving (faster start, slow first requests)")
    spec_arg(s)
    s.set_defaults(fn=cmd_serve)
    return p


_TEXT_ARGS = {"prompt": "the prompt (-p)", "prompt_pos": "the prompt", "system": "--system"}


def _check_text_args(parser, args):
    """Text arguments must be UTF-8. Python hands undecodable argv bytes over as lone surrogates
    (U+DC80..U+DCFF); name the argument and the byte instead of failing inside the tokenizer.
    File names are left alone: any bytes make a valid path."""
    for name, what in _TEXT_ARGS.items():
        v = getattr(args, name, None)
        if isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError as e:
                bad = ord(v[e.start])
                byte = f"byte 0x{bad - 0xDC00:02X}" if 0xDC80 <= bad <= 0xDCFF else f"U+{bad:04X}"
                parser.error(f"{what} is not valid UTF-8 ({byte} at character {e.start})")


def _one_line(e: BaseException) -> str:
    msg = str(e).strip()
    return msg.splitlines()[0] if msg else type(e).__name__


_WRITES_STDOUT = ("generate", "chat", "inspect", "bench", "serve")   # serve: uvicorn's access log


def _check_before_loading(sub, args):
    """What can be checked in a millisecond is checked before a model is loaded (seconds) or the
    default model fetched (minutes, the first time)."""
    _check_text_args(sub, args)
    if args.cmd == "chat" and sys.stdin is None:          # started with stdin closed (<&-)
        raise TffeduError("stdin is closed: tffedu chat reads the conversation from it")
    if args.cmd in _WRITES_STDOUT and sys.stdout is None:   # started with stdout closed (>&-)
        what = "its access log" if args.cmd == "serve" else "its output"
        raise TffeduError(f"stdout is closed: tffedu {args.cmd} writes {what} there")
    if args.cmd == "serve" and args.kv_memory is not None and args.kv_tokens is not None:
        sub.error("give --kv-tokens (the pages) or --kv-memory (a share of the memory), not both")
    if args.cmd == "generate":
        if args.prompt is not None and args.prompt_pos is not None:
            sub.error("give the prompt once: positionally or with -p")
        args.prompt = args.prompt if args.prompt is not None else args.prompt_pos
        if not args.prompt:
            sub.error('give a prompt: tffedu generate "TEXT" (or -p TEXT)')
    if args.model is not None and not os.path.exists(args.model):
        raise ModelError(f"{args.model}: no such file or folder")
    if getattr(args, "device", "cpu") == "cuda":
        from .device import cuda_context
        cuda_context()                 # DeviceError with the reason: no PyCUDA, no driver, no GPU


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    sub = parser._subparsers._group_actions[0].choices[args.cmd]   # for its error(): 'see tffedu generate -h'
    try:
        _check_before_loading(sub, args)
        args.fn(args)
    except BrokenPipeError:            # `tffedu inspect m.gguf | head`: the reader left, not an error
        sys.stdout = open(os.devnull, "w")
        return 0
    except (TffeduError, OSError) as e:
        print(f"tffedu: error: {_one_line(e)}", file=sys.stderr)
        return 1
    except MemoryError:
        print("tffedu: error: out of memory", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as e:             # a bug: still one line (TFFEDU_DEBUG=1 shows the traceback)
        if os.environ.get("TFFEDU_DEBUG"):
            raise
        print(f"tffedu: internal error: {type(e).__name__}: {_one_line(e)} (a bug: please report it; "
              f"TFFEDU_DEBUG=1 shows the traceback)", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
