#!/usr/bin/env bash
# tffedu against llama.cpp on the same GPU and the same files, side by side, in one go, on a Linux
# machine with an NVIDIA GPU, its driver, the CUDA toolkit and CMake, from a clone of the repository:
#
#     bash benchmarks/race_llamacpp.sh --llama-cpp PATH [--out DIR]
#
# PATH (or LLAMA_CPP=PATH) is llama.cpp's source: a folder (a git clone of
# https://github.com/ggml-org/llama.cpp; built in PATH/build) or a .tar.gz/.tar.xz of one (unpacked
# and built in a temporary folder; LLAMA_BIN=DIR instead: the tools of a llama.cpp built already).
# llama-bench, llama-batched-bench and llama-quantize are built (CUDA, flash attention) while
# random-weight Qwen3-0.6B and Qwen3-8B Q8_0 files are written (benchmarks/make_gguf.py, ~9 GB in
# TMPDIR), then both engines run on the same files
# (benchmarks/race.py). The packages come from tools/gpu_packages.sh (WHEELS=DIR: from wheels);
# LLAMA_BUILD=DIR and MODELS_DIR=DIR keep the build and the files for a later race
# (benchmarks/llamacpp.sh).
#
# Results in --out DIR (default benchmarks/results/race-YYYYMMDD-HHMMSS): vs_llamacpp.json (rows as
# in benchmarks/results/h200_vs_llamacpp.json), vs_llamacpp.md (the table), batch_sweep.json (the
# batched decode sweep: per B both sides' t/s and ms per step), gpu.txt, race_raw.tgz (every raw
# output and log).
#
# MODELS="qwen3-0.6b qwen3-8b": the files raced: pp512, tg128, tg128@d2048 (+ tffedu's eager tg128);
#   NAME-TYPE (qwen3-8b-q4_k_m, qwen3-8b-q6_k, ...) is NAME's Q8_0 file requantized by llama-quantize.
# BATCH_MODELS="qwen3-8b" (of MODELS; "" for none): also pp2048 and batch{B} for B in NPL=1,4,8,16,32:
#   llama-batched-bench -npp 128 -ntg 128 -npl $NPL (S_TG t/s) against tffedu.engine.measure_decode
#   (B random 128-token prompts, 128 new tokens each, aggregate decode t/s).
# LONG_MODELS="" (of MODELS): also the long-context rows (issue 35): pp16384, pp32768, tg128@d8192,
#   tg32@d16384 and tg32@d32768, tffedu's model loaded afresh with room for 32k tokens; and the last
#   two over 8-bit K/V ("tg32@d16384 kv q8_0": llama-bench -ctk q8_0 -ctv q8_0, tffedu kv_dtype="Q8_0").
# REPS=3 repetitions. DURING_BUILD="command": run it while llama.cpp compiles (e.g. the GPU tests),
# for at most DURING_BUILD_S=360 s. DEADLINE_S=seconds: no step starts, and none runs, past that
# many seconds from the start (default: no deadline; each step has its own timeout), so that the
# table is written even when the whole run must fit a time limit.
set -uo pipefail
cd "$(dirname "$0")/.."
T_START=$(date +%s)
# shellcheck source=benchmarks/llamacpp.sh
. benchmarks/llamacpp.sh
race_args race "$@"
DEADLINE_S=${DEADLINE_S:-0}
left() { if (( DEADLINE_S > 0 )); then echo $(( T_START + DEADLINE_S - $(date +%s) )); else echo 999999; fi; }
cap() { local l; l=$(left); if (( l < $1 )); then echo $(( l > 1 ? l : 1 )); else echo "$1"; fi; }
in_list() { case " $2 " in *" $1 "*) return 0 ;; esac; return 1; }
# shellcheck source=tools/gpu_packages.sh
. tools/gpu_packages.sh
gpu_packages || exit 1
llamacpp_can_build race
export PYTHONUNBUFFERED=1
WORK=$(mktemp -d "${TMPDIR:-/tmp}/tffedu-race.XXXXXX")
RAW=$WORK/raw
mkdir -p "$OUT_DIR" "$RAW"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT_DIR/gpu.txt"
MODELS=${MODELS:-"qwen3-0.6b qwen3-8b"}
BATCH_MODELS=${BATCH_MODELS-"qwen3-8b"}
LONG_MODELS=${LONG_MODELS:-}
NPL=${NPL:-1,4,8,16,32}
REPS=${REPS:-3}

(for m in $MODELS; do race_model "${m%%-q*}" > /dev/null || exit 1; done) > "$RAW/make_gguf.log" 2>&1 &
gen=$!
t0=$(date +%s)
llamacpp_source "$LLAMA_CPP" || exit 1
llamacpp_build "$RAW/llama_build.log" llama-bench llama-batched-bench llama-quantize &
build=$!
if [ -n "${DURING_BUILD:-}" ]; then timeout -k 10 "$(cap "${DURING_BUILD_S:-360}")" bash -c "$DURING_BUILD"; fi
wait $build || exit 1
echo "llama.cpp built in $(( $(date +%s) - t0 )) s"
wait $gen || { tail -5 "$RAW/make_gguf.log"; exit 1; }
tail -2 "$RAW/make_gguf.log"
LB=$LLAMA_BIN/llama-bench
LBB=$LLAMA_BIN/llama-batched-bench
for m in $MODELS; do
    f=$(race_model "$m") || exit 1
    B=""; P=512; TF_S=300
    if in_list "$m" "$BATCH_MODELS"; then B=$NPL; P=512,2048; TF_S=360; fi
    (( $(left) > 20 )) || { echo "race: out of time before $m"; break; }
    timeout -k 10 "$(cap 120)" "$LB" -m "$f" -ngl 99 -fa 1 -p "$P" -n 128 -r "$REPS" -o json > "$RAW/lc_$m.json" 2> "$RAW/lc_$m.log" \
        || echo "llama-bench $m failed or timed out: see lc_$m.log"
    timeout -k 10 "$(cap 120)" "$LB" -m "$f" -ngl 99 -fa 1 -p 0 -n 128 -d 2048 -r "$REPS" -o json > "$RAW/lc_${m}_d2048.json" 2>> "$RAW/lc_$m.log" \
        || echo "llama-bench -d 2048 $m failed or timed out: see lc_$m.log"
    if [ -n "$B" ]; then
        timeout -k 10 "$(cap 120)" "$LBB" -m "$f" -ngl 99 -fa on -c 40000 -npp 128 -ntg 128 -npl "$B" --output-format jsonl \
            > "$RAW/lc_${m}_batched.jsonl" 2> "$RAW/lc_${m}_batched.log" \
            || echo "llama-batched-bench $m failed or timed out: see lc_${m}_batched.log"
    fi
    # the run writes its rows as it goes: a timeout keeps what it finished
    REPS=$REPS timeout -k 10 "$(cap $TF_S)" \
        "$PYTHON" benchmarks/race.py tffedu "$f" "$RAW/tf_$m.json" ${B:+--batch "$B"} > "$RAW/tf_$m.log" 2>&1 \
        || echo "tffedu $m failed or timed out (rc $?): see tf_$m.log"
    tail -12 "$RAW/tf_$m.log"
    in_list "$m" "$LONG_MODELS" || continue
    (( $(left) > 60 )) || { echo "race: out of time before $m's long rows"; break; }
    timeout -k 10 "$(cap 150)" "$LB" -m "$f" -ngl 99 -fa 1 -p 16384,32768 -n 0 -r "$REPS" -o json > "$RAW/lc_${m}_dlong_pp.json" 2>> "$RAW/lc_$m.log" \
        || echo "llama-bench long prompts $m failed or timed out: see lc_$m.log"
    timeout -k 10 "$(cap 120)" "$LB" -m "$f" -ngl 99 -fa 1 -p 0 -n 128 -d 8192 -r "$REPS" -o json > "$RAW/lc_${m}_dlong_8k.json" 2>> "$RAW/lc_$m.log" \
        || echo "llama-bench -d 8192 $m failed or timed out: see lc_$m.log"
    timeout -k 10 "$(cap 200)" "$LB" -m "$f" -ngl 99 -fa 1 -p 0 -n 32 -d 16384,32768 -r "$REPS" -o json > "$RAW/lc_${m}_dlong_32k.json" 2>> "$RAW/lc_$m.log" \
        || echo "llama-bench -d 16384,32768 $m failed or timed out: see lc_$m.log"
    timeout -k 10 "$(cap 240)" "$LB" -m "$f" -ngl 99 -fa 1 -ctk q8_0 -ctv q8_0 -p 0 -n 32 -d 16384,32768 -r "$REPS" -o json \
        > "$RAW/lc_${m}_dlong_q8.json" 2>> "$RAW/lc_$m.log" \
        || echo "llama-bench -ctk q8_0 -ctv q8_0 $m failed or timed out: see lc_$m.log"
    REPS=$REPS timeout -k 10 "$(cap 420)" \
        "$PYTHON" benchmarks/race.py tffedu "$f" "$RAW/tf_${m}_long.json" --long > "$RAW/tf_${m}_long.log" 2>&1 \
        || echo "tffedu $m long rows failed or timed out (rc $?): see tf_${m}_long.log"
    tail -6 "$RAW/tf_${m}_long.log"
done
"$PYTHON" benchmarks/race.py table "$RAW" | tee "$OUT_DIR/vs_llamacpp.md"
cp "$RAW/vs_llamacpp.json" "$RAW/batch_sweep.json" "$OUT_DIR/"
tar czf "$OUT_DIR/race_raw.tgz" -C "$WORK" raw
rm -rf "$WORK"
echo "race: $(( $(date +%s) - T_START )) s in all; results in $OUT_DIR"
