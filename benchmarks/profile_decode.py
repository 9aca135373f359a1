#!/usr/bin/env python3
"""Where one decode step goes, on the GPU (issue 12's per-kernel table):

    python benchmarks/profile_decode.py MODEL.gguf [--depth 0] [--batch 1] [--leave-out] [--json out.json]

1. tokens/s of the engine's decode loop (tg64) against the GPU time of the replayed step: the
   difference is the host's share of a token (Python, the feed copy, the read-back of the id);
2. every op of the step timed alone (runner.op_timeline), with the bytes it must move (its
   weights, its activations in and out, the K/V it reads) and that as a share of the card's
   copy bandwidth; a table by op kind and one of the first layer's ops;
3. --leave-out: what each kind of kernel costs inside the step, overlap and gaps included: the
   replayed graph timed with that kind's kernel nodes disabled (cuGraphNodeSetEnabled: a disabled
   node runs as an empty one, its edges stay) against the whole step. The outputs are garbage
   then; only the times count. "every GEMV" against "every non-GEMV" splits the step in two.
"""
import argparse
import ctypes
import json
import pathlib
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def graph_kernels(g) -> list:
    "(node, kernel name) of every node of CudaGraph g; non-kernel nodes as (node, None)."
    from tffedu.ops.cuda import _ok, libcuda
    lib, vp = libcuda(), ctypes.c_void_p
    nodes = (vp * g.n_nodes)()
    _ok(lib.cuGraphGetNodes(g.graph, nodes, ctypes.byref(ctypes.c_size_t(len(nodes)))), "cuGraphGetNodes")
    out = []
    for nd in nodes:
        t = ctypes.c_int(-1)
        lib.cuGraphNodeGetType(vp(nd), ctypes.byref(t))
        name = None
        if t.value == 0:                                   # CU_GRAPH_NODE_TYPE_KERNEL
            params = (ctypes.c_uint64 * 32)()              # CUDA_KERNEL_NODE_PARAMS_v2: the function first
            nm = ctypes.c_char_p()
            if lib.cuGraphKernelNodeGetParams_v2(vp(nd), params) == 0 and \
                    lib.cuFuncGetName(ctypes.byref(nm), vp(params[0])) == 0:
                name = nm.value.decode()
        out.append((nd, name))
    return out


def leave_out(g, stream) -> list[dict]:
    "The step's time without each kind of kernel (module docstring, 3.): rows of group, nodes, ms, cost_ms."
    from tffedu.ops.cuda import _ok, libcuda, time_all
    lib, vp = libcuda(), ctypes.c_void_p
    nodes = graph_kernels(g)

    def step_ms():
        return float(np.median(time_all(g.replay, warmup=5, reps=40, stream=stream)))

    gemv = lambda nm: nm.startswith("gemv")
    moe = lambda nm: "_moe" in nm or nm.startswith("moe_gemv")
    # a mixture's routing writes the expert ids and tile tables later kernels index with: left out, they
    # would read garbage addresses, so these stay on in every group
    routing = lambda nm: nm.startswith(("moe_route", "moe_sort"))
    groups = {"quantize_q8_act": lambda nm: nm.startswith("quantize_q8_act"),
              "rmsnorm_quantize_q8": lambda nm: nm.startswith("rmsnorm_quantize_q8"),
              "qk_norm_rope_store": lambda nm: nm.startswith("qk_norm_rope"),
              "paged_attn": lambda nm: nm.startswith("paged_attn"),
              "GEMV + SwiGLU": lambda nm: gemv(nm) and nm.endswith("_glu"),
              "GEMV + residual": lambda nm: gemv(nm) and nm.endswith("_add"),
              "GEMV of q, k, v": lambda nm: gemv(nm) and nm.endswith("_cat"),
              "GEMV plain (the head)": lambda nm: gemv(nm) and not moe(nm) and not nm.endswith(("_glu", "_add", "_cat")),
              "MoE experts' GEMVs": moe, "MoE gather + combine": lambda nm: nm.startswith(("moe_gather", "moe_combine")),
              "every GEMV": gemv, "every non-GEMV": lambda nm: not gemv(nm), "everything": lambda nm: True}
    base, rows = step_ms(), []
    for group, pred in groups.items():
        off = [nd for nd, nm in nodes if nm is not None and pred(nm) and not routing(nm)]
        for nd in off:
            _ok(lib.cuGraphNodeSetEnabled(g.exec_, vp(nd), 0), "cuGraphNodeSetEnabled")
        try:
            ms = step_ms()
        finally:
            for nd in off:
                lib.cuGraphNodeSetEnabled(g.exec_, vp(nd), 1)
        rows.append(dict(group=group, nodes=len(off), ms=ms, cost_ms=base - ms, base_ms=base))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", type=pathlib.Path)
    ap.add_argument("--depth", type=int, default=0, help="tokens of context before the step")
    ap.add_argument("--batch", type=int, default=1, help="sequences decoding together")
    ap.add_argument("--json", type=pathlib.Path)
    ap.add_argument("--cprofile", action="store_true", help="also where the host's share goes (cProfile, 64 steps)")
    ap.add_argument("--leave-out", action="store_true", help="also each kind of kernel's cost inside the step")
    a = ap.parse_args()

    import tffedu
    from tffedu.engine import Engine
    from tffedu.ops.cuda import copy_bandwidth, time_all
    from tffedu.runner import op_bytes, op_timeline, op_totals

    model = tffedu.load(a.model, device="cuda", n_ctx=max(4096, a.depth + 256))
    B = a.batch
    eng = Engine(model, max_batch=B, prefix_caching=False, token_budget=B * (a.depth + 1))   # one prefill step
    rng = np.random.default_rng(0)
    tps = []
    for _ in range(4):                                          # the first one warms up
        reqs = [eng.add(rng.integers(0, model.config.vocab_size, a.depth + 1).tolist(),
                        max_new_tokens=65, ignore_eos=True) for _ in range(B)]
        while not all(r.tokens for r in reqs):
            eng.step()                                          # prefill: the first tokens
        t0 = time.perf_counter()
        while not all(r.done for r in reqs):
            eng.step()
        tps.append(64 / (time.perf_counter() - t0))             # steps per second
    tg = dict(tps=float(np.mean(tps[1:])), std=float(np.std(tps[1:])))
    runner = eng.runner
    ex, g = runner.last_captured("decode")                     # the graph the last steps ran
    step_ms = float(np.median(time_all(g.replay, warmup=5, reps=30, stream=ex.stream)))
    bw = copy_bandwidth() * 1e9                                 # bytes/s, measured
    rows = op_timeline(ex)
    kv_tokens = B * (a.depth + 1)
    calls = {n.name: n for _, n, *_ in ex._calls}
    for r in rows:
        r["bytes"] = op_bytes(calls[r["name"]], runner.weights, kv_tokens)
        r["bw_pct"] = 100 * r["bytes"] / (r["us"] * 1e-6) / bw
    total_us = sum(r["us"] for r in rows)
    total_b = sum(r["bytes"] for r in rows)
    print(f"{a.model.name} batch {B}: tg64@d{a.depth} {tg['tps']:.1f} steps/s ({B * tg['tps']:.0f} t/s) = "
          f"{1e3 / tg['tps']:.3f} ms/step; "
          f"replayed step {step_ms:.3f} ms on the GPU ({len(rows)} ops, {g.n_nodes} graph nodes); "
          f"ops alone {total_us / 1e3:.3f} ms; host share {1e3 / tg['tps'] - step_ms:.3f} ms")
    print(f"bytes per step {total_b / 1e9:.3f} GB; copy bandwidth {bw / 1e12:.2f} TB/s -> bound "
          f"{total_b / bw * 1e3:.3f} ms ({total_b / bw * 1e3 / step_ms * 100:.0f}% of the replayed step)")
    by = op_totals(rows, "bytes")
    print("| op | launches | µs | % of step | GB | % of copy bw |")
    print("|---|---|---|---|---|---|")
    for op, (n, us, b) in sorted(by.items(), key=lambda kv: -kv[1][1]):
        print(f"| {op} | {n} | {us:.0f} | {100 * us / total_us:.1f} | {b / 1e9:.4f} | "
              f"{100 * b / (us * 1e-6) / bw:.0f} |")
    print("first layer:")
    for r in rows:
        if r["name"].startswith("blk.0.") or not r["name"].startswith("blk."):
            print(f"  {r['name']:<24} {r['op']:<24} {r['us']:7.1f} µs {r['bytes'] / 1e6:9.2f} MB "
                  f"{r['bw_pct']:5.0f}%")
    lo = leave_out(g, ex.stream) if a.leave_out else []
    if lo:
        print(f"inside the replayed step ({lo[0]['base_ms']:.4f} ms), each kind of kernel left out:")
        for r in lo:
            print(f"  without {r['group']:<22} ({r['nodes']:3d} nodes): {r['ms']:.4f} ms, so it costs "
                  f"{r['cost_ms']:+.4f} ms ({100 * r['cost_ms'] / r['base_ms']:5.1f} %)")
    if a.cprofile:                                              # the host's share of a token
        import cProfile
        import pstats
        reqs = [eng.add(rng.integers(0, model.config.vocab_size, a.depth + 1).tolist(),
                        max_new_tokens=65, ignore_eos=True) for _ in range(B)]
        while not all(r.tokens for r in reqs):
            eng.step()
        prof = cProfile.Profile()
        prof.enable()
        while not all(r.done for r in reqs):
            eng.step()
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(18)
    if a.json:
        a.json.write_text(json.dumps(dict(model=a.model.name, depth=a.depth, batch=B, tg=tg, step_ms=step_ms,
                                          copy_bw=bw, ops=rows, leave_out=lo), indent=1))


if __name__ == "__main__":
    main()
