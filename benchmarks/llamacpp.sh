# llama.cpp's tools and the random-weight model files for the races; sourced by
# benchmarks/race_llamacpp.sh, race_serve.sh and race_spec.sh (which set WORK, a scratch folder, and
# PYTHON).
#
#   race_args NAME ARGS...      the race scripts' command line (--llama-cpp PATH [--out DIR]): sets
#                               LLAMA_CPP and OUT_DIR (default benchmarks/results/NAME-DATE)
#   llamacpp_can_build NAME     exits unless LLAMA_BIN is given or cmake is here
#   llamacpp_source SRC         where the source is and the build goes; sets LLAMA_BIN
#   llamacpp_build LOG TARGET...  builds the TARGETs (CUDA, for this GPU) there
#   race_model NAME             prints the path of NAME's file (benchmarks/make_gguf.py); NAME-TYPE
#                               (qwen3-8b-q4_k_m) is NAME's file requantized by llama-quantize
#
# SRC is llama.cpp's source: a folder (built in SRC/build) or a .tar.gz/.tar.xz of one (unpacked
# beside the build folder, built in WORK/build). LLAMA_BUILD=DIR builds in DIR instead and keeps
# it: a later race reuses it and builds only what is missing. LLAMA_BIN=DIR takes the tools from a
# llama.cpp you built yourself (CUDA, flash attention; its bin folder): nothing is built, and no
# --llama-cpp is needed. MODELS_DIR=DIR (default WORK/models) keeps the model files likewise: one
# that is there already is not written again.

race_args() {  # NAME ARGS...: the race scripts' command line: sets LLAMA_CPP and OUT_DIR, or exits 2
    local script
    script=$(basename "$0")
    LLAMA_CPP=${LLAMA_CPP:-}
    OUT_DIR=benchmarks/results/$1-$(date +%Y%m%d-%H%M%S)
    shift
    while [ $# -gt 0 ]; do
        case "$1" in
            --llama-cpp) LLAMA_CPP=${2:?--llama-cpp needs a folder or a tarball}; shift 2 ;;
            --out) OUT_DIR=${2:?--out needs a folder}; shift 2 ;;
            *) echo "usage: bash benchmarks/$script --llama-cpp PATH [--out DIR]"; exit 2 ;;
        esac
    done
    [ -n "$LLAMA_CPP" ] || [ -n "${LLAMA_BIN:-}" ] || { echo "${script%.sh}: give llama.cpp's source: --llama-cpp FOLDER|TARBALL (git clone https://github.com/ggml-org/llama.cpp), or LLAMA_BIN=the bin folder of a build"; exit 2; }
    [ -z "${LLAMA_BIN:-}" ] || [ -d "$LLAMA_BIN" ] || { echo "${script%.sh}: LLAMA_BIN=$LLAMA_BIN: no such folder"; exit 2; }
    [ -z "$LLAMA_CPP" ] || [ -e "$LLAMA_CPP" ] || { echo "${script%.sh}: $LLAMA_CPP: no such folder or file"; exit 2; }
}

llamacpp_can_build() {  # NAME: exits unless the tools are given (LLAMA_BIN) or cmake can build them
    [ -n "${LLAMA_BIN:-}" ] || command -v cmake >/dev/null || { echo "$1: cmake is needed to build llama.cpp"; exit 1; }
}

llamacpp_source() {  # SRC: sets LLAMA_SRC, LLAMA_BUILD_DIR and LLAMA_BIN (unpacks a tarball once)
    local top
    if [ -n "${LLAMA_BIN:-}" ]; then LLAMA_PREBUILT=1; return 0; fi   # tools built elsewhere: nothing to build
    if [ -d "$1" ]; then
        LLAMA_SRC=$1; LLAMA_BUILD_DIR=${LLAMA_BUILD:-$1/build}
    else
        LLAMA_BUILD_DIR=${LLAMA_BUILD:-$WORK/build}
        if [ ! -f "$LLAMA_BUILD_DIR.src/.unpacked" ]; then
            rm -rf "$LLAMA_BUILD_DIR.src" && mkdir -p "$LLAMA_BUILD_DIR.src" \
                && tar xf "$1" -C "$LLAMA_BUILD_DIR.src" || { echo "cannot unpack $1"; return 1; }
            touch "$LLAMA_BUILD_DIR.src/.unpacked"
        fi
        top=$(find "$LLAMA_BUILD_DIR.src" -maxdepth 2 -name CMakeLists.txt | awk '{ print length($0), $0 }' | sort -n | head -1 | cut -d' ' -f2-)
        [ -n "$top" ] || { echo "$1 holds no CMakeLists.txt"; return 1; }
        LLAMA_SRC=$(dirname "$top")
    fi
    LLAMA_BIN=$LLAMA_BUILD_DIR/bin
}

llamacpp_build() {  # LOG TARGET...: builds the targets in LLAMA_BUILD_DIR (after llamacpp_source)
    local log=$1 arch t
    shift
    if [ -n "${LLAMA_PREBUILT:-}" ]; then
        for t in "$@"; do
            [ -x "$LLAMA_BIN/$t" ] || { echo "LLAMA_BIN=$LLAMA_BIN has no $t" | tee "$log"; return 1; }
        done
        return 0
    fi
    arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d '.')
    cmake -S "$LLAMA_SRC" -B "$LLAMA_BUILD_DIR" -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="${arch:-90}" \
        -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
        -DLLAMA_BUILD_SERVER=ON -DCMAKE_BUILD_TYPE=Release > "$log" 2>&1 \
        && cmake --build "$LLAMA_BUILD_DIR" -j"$(nproc)" --target "$@" >> "$log" 2>&1 \
        || { tail -20 "$log"; return 1; }
}

race_model() {
    local dir=${MODELS_DIR:-$WORK/models} base=${1%%-q*}
    mkdir -p "$dir"
    if [ ! -s "$dir/$base.gguf" ]; then   # written aside, then renamed: a killed run leaves no half file
        "$PYTHON" benchmarks/make_gguf.py "$base" "$dir/$base.gguf.part" >&2 && mv "$dir/$base.gguf.part" "$dir/$base.gguf" \
            || return 1
    fi
    if [ "$base" != "$1" ] && [ ! -s "$dir/$1.gguf" ]; then   # NAME-TYPE: the Q8_0 file requantized by llama.cpp
        [ -x "${LLAMA_BIN:-}/llama-quantize" ] || { echo "race_model $1: build llama-quantize first" >&2; return 1; }
        "$LLAMA_BIN/llama-quantize" --allow-requantize "$dir/$base.gguf" "$dir/$1.gguf.part" "$(echo "${1#"$base"-}" | tr a-z A-Z)" \
            > "$dir/$1.quantize.log" 2>&1 && mv "$dir/$1.gguf.part" "$dir/$1.gguf" || { tail -3 "$dir/$1.quantize.log" >&2; return 1; }
    fi
    echo "$dir/$1.gguf"
}
