#!/usr/bin/env bash
# `tffedu serve` against llama-server on the same GPU, the same file and the same load, one after the
# other in one go, on a Linux machine with an NVIDIA GPU, its driver, the CUDA toolkit and CMake,
# from a clone of the repository:
#
#     bash benchmarks/race_serve.sh --llama-cpp PATH [--out DIR]
#
# PATH (or LLAMA_CPP=PATH) is llama.cpp's source, a folder or a .tar.gz/.tar.xz of one, as for
# benchmarks/race_llamacpp.sh; llama-server is built from it (CUDA) while a random-weight
# Qwen3-8B Q8_0 file is written (benchmarks/make_gguf.py, MODEL=qwen3-8b); LLAMA_BUILD=DIR and
# MODELS_DIR=DIR reuse a race's build and files, LLAMA_BIN=DIR a llama.cpp built already
# (benchmarks/llamacpp.sh). Each server in turn is started on 127.0.0.1, loaded by
# benchmarks/bench_serve.py (CONCURRENCY="1 8 32 64" clients, PROMPT_WORDS=128-word prompts,
# MAX_TOKENS=128 new tokens, ignore_eos, greedy) and stopped:
#   llama-server -np $SLOTS -fa on -c $((SLOTS * SLOT_CTX))          (SLOTS=64, SLOT_CTX=512)
#   tffedu serve --device cuda --max-batch $SLOTS --kv-tokens $((SLOTS * SLOT_CTX))
# Results in --out DIR (default benchmarks/results/serve-YYYYMMDD-HHMMSS): serve.json (a row per
# server and load: TTFT, ITL and end-to-end p50/p99, output tokens/s), serve.md (the two side by
# side, with ratios), serve.png (latency against throughput), and the servers' logs.
set -uo pipefail
cd "$(dirname "$0")/.."
T_START=$(date +%s)
# shellcheck source=benchmarks/llamacpp.sh
. benchmarks/llamacpp.sh
race_args serve "$@"
MODEL=${MODEL:-qwen3-8b}
CONCURRENCY=${CONCURRENCY:-"1 8 32 64"}
PROMPT_WORDS=${PROMPT_WORDS:-128}
MAX_TOKENS=${MAX_TOKENS:-128}
SLOTS=${SLOTS:-64}
SLOT_CTX=${SLOT_CTX:-512}
# shellcheck source=tools/gpu_packages.sh
. tools/gpu_packages.sh
gpu_packages fastapi=fastapi uvicorn=uvicorn prometheus_client=prometheus-client httpx=httpx \
    matplotlib=matplotlib || exit 1
llamacpp_can_build race_serve
export PYTHONUNBUFFERED=1
WORK=$(mktemp -d "${TMPDIR:-/tmp}/tffedu-serve.XXXXXX")
mkdir -p "$OUT_DIR"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT_DIR/gpu.txt"

race_model "$MODEL" > /dev/null 2> "$OUT_DIR/make_gguf.log" &
gen=$!
t0=$(date +%s)
llamacpp_source "$LLAMA_CPP" && llamacpp_build "$OUT_DIR/llama_build.log" llama-server || exit 1
echo "llama-server built in $(( $(date +%s) - t0 )) s"
wait $gen || { tail -5 "$OUT_DIR/make_gguf.log"; exit 1; }
GGUF=$(race_model "$MODEL") || exit 1

up() {  # wait for GET $1/health to answer 200 (at most $2 s) while process $3 lives
    local i
    for i in $(seq "$2"); do
        kill -0 "$3" 2>/dev/null || return 1
        "$PYTHON" -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1] + '/health', timeout=2)" \
            "$1" 2>/dev/null && return 0
        sleep 1
    done
    return 1
}

load() {  # run the load generator against $1, rows labelled $2
    # shellcheck disable=SC2086
    "$PYTHON" benchmarks/bench_serve.py --url "$1" --label "$2" --concurrency $CONCURRENCY \
        --prompt-tokens "$PROMPT_WORDS" --max-tokens "$MAX_TOKENS" --ignore-eos --json "$OUT_DIR/serve.json"
}

rm -f "$OUT_DIR/serve.json"
"$LLAMA_BIN/llama-server" -m "$GGUF" -ngl 99 -fa on -np "$SLOTS" -c $(( SLOTS * SLOT_CTX )) \
    --host 127.0.0.1 --port 8091 > "$OUT_DIR/llama_server.log" 2>&1 &
srv=$!
if up http://127.0.0.1:8091 300 $srv; then load http://127.0.0.1:8091 llama-server
else echo "race_serve: llama-server did not come up"; tail -20 "$OUT_DIR/llama_server.log"; fi
kill -INT $srv 2>/dev/null; wait $srv 2>/dev/null

"$PYTHON" -m tffedu.cli serve -m "$GGUF" --device cuda --max-batch "$SLOTS" \
    --kv-tokens $(( SLOTS * SLOT_CTX )) --port 8092 > "$OUT_DIR/tffedu_serve.log" 2>&1 &
srv=$!
if up http://127.0.0.1:8092 300 $srv; then load http://127.0.0.1:8092 tffedu
else echo "race_serve: tffedu serve did not come up"; tail -20 "$OUT_DIR/tffedu_serve.log"; fi
kill -INT $srv 2>/dev/null; wait $srv 2>/dev/null

"$PYTHON" - "$OUT_DIR" <<'EOF' | tee "$OUT_DIR/serve.md"
import json, sys
sys.path.insert(0, "benchmarks")
from bench_serve import plot
out = sys.argv[1]
rows = json.load(open(f"{out}/serve.json"))
plot(rows, f"{out}/serve.png")
by = {(r["label"], r["load"]): r for r in rows}
print("| load | llama-server tok/s | tffedu tok/s | ratio | TTFT p50 ms (llama / tffedu) | ITL p50 ms (llama / tffedu) |")
print("| --- | ---: | ---: | ---: | --- | --- |")
for load in dict.fromkeys(r["load"] for r in rows):
    a, b = by.get(("llama-server", load)), by.get(("tffedu", load))
    if a and b:
        print(f"| {load} | {a['output_tokens_per_s']:.0f} | {b['output_tokens_per_s']:.0f} | "
              f"{b['output_tokens_per_s'] / a['output_tokens_per_s']:.2f}x | {a['ttft_p50_ms']:.0f} / "
              f"{b['ttft_p50_ms']:.0f} | {a['itl_p50_ms']:.2f} / {b['itl_p50_ms']:.2f} |")
EOF
rm -rf "$WORK"
echo "race_serve: $(( $(date +%s) - T_START )) s in all; results in $OUT_DIR"
