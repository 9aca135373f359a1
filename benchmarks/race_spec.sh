#!/usr/bin/env bash
# Speculative decoding on a GPU (chapter 16), tffedu's and llama-server's, on the same file and the
# same prompts, in one go, on a Linux machine with an NVIDIA GPU, its driver, the CUDA toolkit and
# CMake, from a clone of the repository:
#
#     bash benchmarks/race_spec.sh --llama-cpp PATH [--out DIR]
#
# PATH (or LLAMA_CPP=PATH) is llama.cpp's source, as for benchmarks/race_llamacpp.sh; llama-server
# is built from it while random-weight model files are written (benchmarks/make_gguf.py);
# LLAMA_BUILD=DIR and MODELS_DIR=DIR keep and reuse them, LLAMA_BIN=DIR takes a llama.cpp built
# already (benchmarks/llamacpp.sh). Then:
#   1. the cost of a verify step, k = 0..8 draft tokens, on COST_MODEL (default qwen3-8b: a random
#      Qwen3-8B Q8_0): benchmarks/bench_verify_cost.py -> verify_cost.json, verify_cost.png;
#   2. prompt lookup on benchmarks/spec_prompts.json, greedy, SPEC_N new tokens: tffedu plain and
#      --spec ngram (benchmarks/bench_spec.py), and llama-server without and with n-gram drafts
#      (LLAMA_SPECS, each a flag list for llama-server; benchmarks/llamacpp_spec.py), on SPEC_MODEL:
#      a GGUF path (default: tffedu's default model, SmolLM2-135M-Instruct, fetched once) or a
#      make_gguf.py name.
# REPS=3 runs per prompt (the fastest kept); SPEC_N=256 new tokens at most. DURING_BUILD="command":
# run it first, while llama.cpp compiles (e.g. the GPU tests), for at most DURING_BUILD_S=300 s.
# Results in --out DIR (default benchmarks/results/spec-YYYYMMDD-HHMMSS): spec.md (the table), the
# two benchmarks' JSON, verify_cost.png and the servers' logs.
set -uo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=benchmarks/llamacpp.sh
. benchmarks/llamacpp.sh
race_args spec "$@"
COST_MODEL=${COST_MODEL:-qwen3-8b}
SPEC_MODEL=${SPEC_MODEL:-}
SPEC_N=${SPEC_N:-256}
REPS=${REPS:-3}
LLAMA_SPECS=${LLAMA_SPECS:-"--spec-type ngram-simple|--spec-type ngram-simple --spec-ngram-simple-size-n 3 --spec-ngram-simple-size-m 16|--spec-type ngram-mod"}
# shellcheck source=tools/gpu_packages.sh
. tools/gpu_packages.sh
gpu_packages matplotlib=matplotlib || exit 1
llamacpp_can_build race_spec
export PYTHONUNBUFFERED=1
WORK=$(mktemp -d "${TMPDIR:-/tmp}/tffedu-spec.XXXXXX")
mkdir -p "$OUT_DIR"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT_DIR/gpu.txt"

t0=$(date +%s)
llamacpp_source "$LLAMA_CPP" || exit 1
llamacpp_build "$OUT_DIR/llama_build.log" llama-server &
build=$!
if [ -n "${DURING_BUILD:-}" ]; then timeout -k 10 "${DURING_BUILD_S:-300}" bash -c "$DURING_BUILD"; fi
if [ -z "$SPEC_MODEL" ]; then
    SPEC_GGUF=$("$PYTHON" -c "from tffedu.assets import default_model_path as p; print(p(quiet=True))") || exit 1
elif [ -f "$SPEC_MODEL" ]; then SPEC_GGUF=$SPEC_MODEL
else SPEC_GGUF=$(race_model "$SPEC_MODEL" 2>> "$OUT_DIR/make_gguf.log") || exit 1
fi
# the GPU is free while llama.cpp compiles: tffedu's two measurements first
COST_GGUF=$(race_model "$COST_MODEL" 2>> "$OUT_DIR/make_gguf.log") || { tail -5 "$OUT_DIR/make_gguf.log"; exit 1; }
"$PYTHON" benchmarks/bench_verify_cost.py --model "$COST_GGUF" --device cuda -k 8 --steps 30 \
    --json "$OUT_DIR/verify_cost.json" --png "$OUT_DIR/verify_cost.png" 2>&1 | tee "$OUT_DIR/verify_cost.txt"
"$PYTHON" benchmarks/bench_spec.py --model "$SPEC_GGUF" --device cuda -n "$SPEC_N" --reps "$REPS" \
    --json "$OUT_DIR/tffedu_spec.json" 2>&1 | tee "$OUT_DIR/tffedu_spec.txt"
wait $build || exit 1
echo "llama-server built in $(( $(date +%s) - t0 )) s"

i=0
IFS='|' read -r -a specs <<< "|$LLAMA_SPECS"          # the first: no drafts
for flags in "${specs[@]}"; do
    # shellcheck disable=SC2086
    "$LLAMA_BIN/llama-server" -m "$SPEC_GGUF" -ngl 99 -fa on -np 1 -c 4096 $flags \
        --host 127.0.0.1 --port 8093 > "$OUT_DIR/llama_server_$i.log" 2>&1 &
    srv=$!
    echo "llama-server ${flags:-(no drafts)}"
    "$PYTHON" benchmarks/llamacpp_spec.py --url http://127.0.0.1:8093 -n "$SPEC_N" --reps "$REPS" \
        --json "$OUT_DIR/llama_spec_$i.json" || tail -20 "$OUT_DIR/llama_server_$i.log"
    kill -INT $srv 2>/dev/null; wait $srv 2>/dev/null
    echo "${flags:-(no drafts)}" > "$OUT_DIR/llama_spec_$i.flags"
    i=$((i + 1))
done

"$PYTHON" - "$OUT_DIR" <<'EOF' | tee "$OUT_DIR/spec.md"
import glob, json, os, sys
out = sys.argv[1]
t = json.load(open(os.path.join(out, "tffedu_spec.json")))["total"]
print(f"| engine | decode t/s | vs its plain | drafted | accepted |\n|---|---|---|---|---|")
print(f"| tffedu | {t['plain_tps']:.1f} | 1.00 | | |")
print(f"| tffedu --spec ngram | {t['spec_tps']:.1f} | {t['speedup']:.2f} | {t['drafted']} | {t['accepted']} |")
rows = sorted(glob.glob(os.path.join(out, "llama_spec_*.json")))
base = None
for f in rows:
    r = json.load(open(f))["total"]
    flags = open(f.replace(".json", ".flags")).read().strip()
    base = base or r["tps"]
    print(f"| llama-server {flags} | {r['tps']:.1f} | {r['tps'] / base:.2f} | {r['drafted']} | {r['accepted']} |")
EOF
