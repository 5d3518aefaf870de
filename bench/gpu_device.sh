#!/usr/bin/env bash
# The GPU bench in one command on the GPU machine (issue 46): ours hf against lm-eval's HF on the whole benchmark.
#
#   .venv/bin/python bench/gpu_wheels.py          # here: .gpu-wheels/ (what the GPU machine lacks, ~20 MiB)
#   bash bench/gpu_device.sh                      # there (run with carry [".gpu-wheels"], timeout 600)
#   bash bench/gpu_device.sh --shape tiny --device cpu --limit 1 --max-new 4 --threads 1 --tasks wic,ner_adg   # a CPU
#
# 1. installs the carried wheels (.gpu-wheels/, or $WHEELS) without an index and without dependencies (each one is
#    there), when a module the bench needs is missing; 2. bench/gpu.py builds the data from raw/ and the
#    Llama-3.1-8B-shaped random bf16 model, then times ours hf and lm-eval's HF, each in its own process, and prints
#    wall time, model tokens per second, MFU against the GPU's dense bf16 peak (log-likelihoods and generations apart),
#    peak GPU memory and the projected time of the whole benchmark.
# --limit 1: random weights never stop early, so each of the 24 generation calls runs its whole 256 tokens: about
# 3,100 decode steps an engine at --limit 1, ~100 s at an estimated 30 ms a step for an 8B model in HF's generate,
# plus 4 s of log-likelihoods (~100k tokens at 40 % of 989 TFLOPS), the load and the warm-up: two engines, the model's
# build and the data fit 8 minutes (an estimate, never measured: no GPU was at hand when this was written).
# --budget-s 480: no engine is started after 8 minutes. Arguments given are passed to bench/gpu.py after these.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-$(command -v python3 || command -v python)}
WHEELS=${WHEELS:-.gpu-wheels}
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false PIP_DISABLE_PIP_VERSION_CHECK=1

if ! "$PY" -c "import evalita_eval, evalita_data, pydantic, jsonschema, datasets, lm_eval, accelerate" 2>/dev/null; then
  ls "$WHEELS"/*.whl >/dev/null 2>&1 || { echo "gpu_device.sh: modules missing and no wheels in $WHEELS: run bench/gpu_wheels.py here and carry $WHEELS" >&2; exit 2; }
  # Into a folder of their own, first on the path: the machine's own packages stay as they are.
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/gpu-bench-site "$WHEELS"/*.whl
  export PYTHONPATH=/tmp/gpu-bench-site${PYTHONPATH:+:$PYTHONPATH}
fi
"$PY" - <<'EOF'
import importlib.metadata as md, sys, torch
names = ("torch", "transformers", "tokenizers", "evalita-llm", "lm_eval", "pydantic", "datasets")
print(f"gpu_device.sh | Python {sys.version.split()[0]} | " + " | ".join(f"{n} {md.version(n)}" for n in names)
      + f" | CUDA {torch.version.cuda} | " + (torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU"), flush=True)
EOF
"$PY" - <<'EOF'
import time, torch
if torch.cuda.is_available():  # the reachable bf16 matrix rate, beside the data sheet's peak bench/gpu.py divides by
    a, b = (torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(10):
        a @ b
    torch.cuda.synchronize()
    print(f"gpu_device.sh | bf16 matrix product 8192^3, random data: {10 * 2 * 8192**3 / (time.perf_counter() - t) / 1e12:.0f} TFLOP/s", flush=True)
EOF
start=$(date +%s)
"$PY" bench/gpu.py --engines ours-hf,lmeval-hf --limit 1 --budget-s 480 --markdown "$@"
echo "gpu_device.sh | bench/gpu.py took $(( $(date +%s) - start )) s"
