#!/bin/bash
# Device run for chapters 10 and 12 (issue 6): gpu tests, then the two notebooks executed in place.
#   on the device machine, from the repo root:  bash tools/gpu_ch10_12.sh [tests] [nb10] [nb12]
# (no argument: all three). Logs and executed notebooks go to $OUT (or ./out_gpu when unset).
set -o pipefail
OUT=${OUT:-$PWD/out_gpu}; mkdir -p "$OUT"
. .whl/setup.sh && export PYTHONPATH=$PYTHONPATH:$PWD
export PYTHONUNBUFFERED=1 PYCUDA_CACHE_DIR=/tmp/pycuda-cache
mkdir -p $PYCUDA_CACHE_DIR
what=${*:-tests nb10 nb12}
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.used --format=csv 2>&1 | tee "$OUT/env.txt"
python3 -c "import pycuda, torch; print('pycuda', pycuda.VERSION_TEXT, 'torch', torch.__version__)" 2>&1 | tee -a "$OUT/env.txt"

if [[ " $what " == *" tests "* ]]; then
  timeout ${PYTEST_LIMIT:-170} python3 -m pytest -q -rfE --timeout 100 tests/test_cuda_kernels.py tests/test_cuda_attention.py \
      2>&1 | tee "$OUT/pytest.txt" | tail -40
fi

run_nb() {   # execute a notebook in place (every cell: this machine has the GPU), like tools/nbbuild.py
  python3 - "$1" <<'PY'
import sys, pathlib, nbformat
from nbclient import NotebookClient
p = pathlib.Path(sys.argv[1])
nb = nbformat.read(p, as_version=4)
for c in nb.cells:
    if c.cell_type == "code":
        c.outputs, c.execution_count = [], None
client = NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(p.parent)}})
err = None
with client.setup_kernel():
    for i, c in enumerate(nb.cells):
        if c.cell_type != "code":
            continue
        try:
            client.execute_cell(c, i)
        except Exception as e:
            err = e
            print(f"cell {i} failed: {type(e).__name__}: {str(e)[-3000:]}")
            break
        finally:
            c.metadata.pop("execution", None)
nbformat.write(nb, p)
for c in nb.cells:   # echo the text outputs, so the log shows the tables
    for o in c.get("outputs", []):
        if o.get("output_type") == "stream":
            print(o["text"][-4000:], end="")
sys.exit(1 if err else 0)
PY
}
for n in 10_cuda_basics 12_attention; do
  key=nb${n%%_*}
  if [[ " $what " == *" $key "* ]]; then
    echo "=== notebook $n"
    timeout ${NB_LIMIT:-150} bash -c "$(declare -f run_nb); run_nb notebooks/$n.ipynb" 2>&1 | tee "$OUT/$n.log" | tail -80
    cp notebooks/$n.ipynb "$OUT/"
  fi
done
ls -la "$OUT"
