#!/usr/bin/env bash
# The H200 race in one device call: llama.cpp built from source (the peers' tarball, carried as
# .race/llama.cpp-src.tar.xz; llama-bench and llama-batched-bench), random-weight Qwen3-0.6B and
# Qwen3-8B Q8_0 files written while it builds (benchmarks/make_gguf.py), then llama.cpp and tffedu
# on the same files, side by side (benchmarks/race.py). Results in $OUT: h200_vs_llamacpp.json
# (rows for benchmarks/results/), h200_vs_llamacpp.md (the table), batch_sweep.json (the batched
# decode sweep, per B: both sides' t/s and ms per step), race_raw.tgz (every raw output and log).
#   run(command="WHL_DIR=.whl bash benchmarks/race_llamacpp.sh", carry=[".whl", ".race"] (the tarball in .race/))
# MODELS="qwen3-0.6b qwen3-8b": the files raced: pp512, tg128, tg128@d2048 (+ tffedu's eager tg128).
# BATCH_MODELS="qwen3-8b" (of MODELS; "" for none): also pp2048 and batch{B} for B in NPL=1,4,8,16,32:
#   llama-batched-bench -npp 128 -ntg 128 -npl $NPL (S_TG t/s) against tffedu.engine.measure_decode
#   (B random 128-token prompts, 128 new tokens each, aggregate decode t/s).
# DURING_BUILD="command": run it while llama.cpp compiles (e.g. the GPU tests), at most DURING_BUILD_S=360 s.
# REPS=3. DEADLINE_S=560: every step after the build gets at most what is left of it (and its own
# timeout), so a hang cannot run the call past the device's 600 s and the table is always written.
set -uo pipefail
T_START=$(date +%s)
DEADLINE_S=${DEADLINE_S:-560}
left() { echo $(( T_START + DEADLINE_S - $(date +%s) )); }
cap() { local l; l=$(left); if (( l < $1 )); then echo $(( l > 1 ? l : 1 )); else echo "$1"; fi; }
in_list() { case " $2 " in *" $1 "*) return 0 ;; esac; return 1; }
WHL_DIR=${WHL_DIR:-.whl}
. "$WHL_DIR/setup.sh" >/dev/null || { echo "no wheels in $WHL_DIR"; exit 1; }
export PYTHONPATH=${PYTHONPATH:-}:$PWD PYTHONUNBUFFERED=1 PYCUDA_CACHE_DIR=/tmp/pycuda-cache PATH=$PATH:/usr/local/cuda/bin
python3 -c "import gguf, pycuda" || { echo "gguf/pycuda missing: nothing to race"; exit 1; }
[ -f .race/llama.cpp-src.tar.xz ] || { echo "carry .race/llama.cpp-src.tar.xz"; exit 1; }
OUT=${OUT:-/tmp/out}; RAW=/tmp/race; mkdir -p "$OUT" "$RAW" /tmp/models /tmp/lc "$PYCUDA_CACHE_DIR"
MODELS=${MODELS:-"qwen3-0.6b qwen3-8b"}
BATCH_MODELS=${BATCH_MODELS-"qwen3-8b"}
NPL=${NPL:-1,4,8,16,32}
REPS=${REPS:-3}
(for m in $MODELS; do python3 benchmarks/make_gguf.py "$m" "/tmp/models/$m.gguf"; done) > /tmp/make_gguf.log 2>&1 &
gen=$!
t0=$(date +%s)
(tar xJf .race/llama.cpp-src.tar.xz -C /tmp/lc && cd /tmp/lc/llama.cpp && cmake -B build -DGGML_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DCMAKE_BUILD_TYPE=Release \
    && cmake --build build -j16 --target llama-bench llama-batched-bench) > /tmp/llama_build.log 2>&1 &
build=$!
if [ -n "${DURING_BUILD:-}" ]; then timeout -k 10 "$(cap "${DURING_BUILD_S:-360}")" bash -c "$DURING_BUILD"; fi
wait $build || { tail -20 /tmp/llama_build.log; exit 1; }
echo "llama.cpp built in $(( $(date +%s) - t0 )) s"
wait $gen; tail -2 /tmp/make_gguf.log
LB=/tmp/lc/llama.cpp/build/bin/llama-bench
LBB=/tmp/lc/llama.cpp/build/bin/llama-batched-bench
for m in $MODELS; do
    f=/tmp/models/$m.gguf
    B=""; P=512; TF_S=300
    if in_list "$m" "$BATCH_MODELS"; then B=$NPL; P=512,2048; TF_S=360; fi
    (( $(left) > 20 )) || { echo "race: out of time before $m"; break; }
    timeout -k 10 "$(cap 120)" $LB -m "$f" -ngl 99 -fa 1 -p "$P" -n 128 -r "$REPS" -o json > "$RAW/lc_$m.json" 2> "$RAW/lc_$m.log" \
        || echo "llama-bench $m failed or timed out: see lc_$m.log"
    timeout -k 10 "$(cap 120)" $LB -m "$f" -ngl 99 -fa 1 -p 0 -n 128 -d 2048 -r "$REPS" -o json > "$RAW/lc_${m}_d2048.json" 2>> "$RAW/lc_$m.log" \
        || echo "llama-bench -d 2048 $m failed or timed out: see lc_$m.log"
    if [ -n "$B" ]; then
        timeout -k 10 "$(cap 120)" $LBB -m "$f" -ngl 99 -fa on -c 40000 -npp 128 -ntg 128 -npl "$B" --output-format jsonl \
            > "$RAW/lc_${m}_batched.jsonl" 2> "$RAW/lc_${m}_batched.log" \
            || echo "llama-batched-bench $m failed or timed out: see lc_${m}_batched.log"
    fi
    # the run writes its rows as it goes: a timeout keeps what it finished
    REPS=$REPS timeout -k 10 "$(cap $TF_S)" \
        python3 benchmarks/race.py tffedu "$f" "$RAW/tf_$m.json" ${B:+--batch "$B"} > "$RAW/tf_$m.log" 2>&1 \
        || echo "tffedu $m failed or timed out (rc $?): see tf_$m.log"
    tail -12 "$RAW/tf_$m.log"
done
python3 benchmarks/race.py table "$RAW" | tee "$OUT/h200_vs_llamacpp.md"
cp "$RAW/h200_vs_llamacpp.json" "$RAW/batch_sweep.json" "$OUT/"
tar czf "$OUT/race_raw.tgz" -C /tmp race llama_build.log make_gguf.log 2>/dev/null
echo "race: $(( $(date +%s) - T_START )) s in all"
