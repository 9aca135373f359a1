#!/usr/bin/env bash
# The H200 race in one device call: llama.cpp built from source (the peers' tarball, carried as
# .race/llama.cpp-src.tar.xz), random-weight Qwen3-0.6B and Qwen3-8B Q8_0 files written while it
# builds (benchmarks/make_gguf.py), then llama-bench and tffedu bench on the same files, side by
# side. Results: $OUT/h200_vs_llamacpp.json (rows for benchmarks/results/) and a table.
#   run(command="WHL_DIR=.whl bash benchmarks/race_llamacpp.sh", carry=[".whl", ".race"] (the tarball in .race/))
# DURING_BUILD="command": run it while llama.cpp compiles (e.g. the GPU tests).
set -uo pipefail
WHL_DIR=${WHL_DIR:-.whl}
. "$WHL_DIR/setup.sh" >/dev/null || { echo "no wheels in $WHL_DIR"; exit 1; }
export PYTHONPATH=$PYTHONPATH:$PWD PYTHONUNBUFFERED=1 PYCUDA_CACHE_DIR=/tmp/pycuda-cache PATH=$PATH:/usr/local/cuda/bin
python3 -c "import gguf, pycuda" || { echo "gguf/pycuda missing: nothing to race"; exit 1; }
[ -f .race/llama.cpp-src.tar.xz ] || { echo "carry .race/llama.cpp-src.tar.xz"; exit 1; }
OUT=${OUT:-/tmp/out}; RAW=/tmp/race; mkdir -p "$OUT" "$RAW" /tmp/models /tmp/lc "$PYCUDA_CACHE_DIR"
MODELS=${MODELS:-"qwen3-0.6b qwen3-8b"}
REPS=${REPS:-3}
(for m in $MODELS; do python3 benchmarks/make_gguf.py "$m" "/tmp/models/$m.gguf"; done) > /tmp/make_gguf.log 2>&1 &
gen=$!
t0=$(date +%s)
(tar xJf .race/llama.cpp-src.tar.xz -C /tmp/lc && cd /tmp/lc/llama.cpp && cmake -B build -DGGML_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DCMAKE_BUILD_TYPE=Release \
    && cmake --build build -j16 --target llama-bench) > /tmp/llama_build.log 2>&1 &
build=$!
if [ -n "${DURING_BUILD:-}" ]; then bash -c "$DURING_BUILD"; fi
wait $build || { tail -20 /tmp/llama_build.log; exit 1; }
echo "llama.cpp built in $(( $(date +%s) - t0 )) s"
wait $gen; tail -2 /tmp/make_gguf.log
LB=/tmp/lc/llama.cpp/build/bin/llama-bench
for m in $MODELS; do
    f=/tmp/models/$m.gguf
    $LB -m "$f" -ngl 99 -fa 1 -p 512 -n 128 -r "$REPS" -o json > "$RAW/lc_$m.json" 2> "$RAW/lc_$m.log"
    $LB -m "$f" -ngl 99 -fa 1 -p 0 -n 128 -d 2048 -r "$REPS" -o json > "$RAW/lc_${m}_d2048.json" 2>> "$RAW/lc_$m.log"
    REPS=$REPS timeout 300 python3 benchmarks/race.py tffedu "$f" "$RAW/tf_$m.json" 2>&1 | tail -6
done
python3 benchmarks/race.py table "$RAW" | tee "$OUT/h200_vs_llamacpp.md"
cp "$RAW/h200_vs_llamacpp.json" "$OUT/"
tar czf "$OUT/race_raw.tgz" -C /tmp race llama_build.log make_gguf.log 2>/dev/null
