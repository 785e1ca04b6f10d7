#!/usr/bin/env bash
# The GPU check of issue 32 (item 5) on a lent device: bootstrap the environment when needed, then run
# `python -m benchmarks.gpu_check` (see its docstring) under a total time limit.
#
#   benchmarks/gpu_check.sh [--wheels DIR] [--limit-s SECONDS] [--] [gpu_check.py options]
#   benchmarks/gpu_check.sh --download-wheels DIR [--faiss gpu|cpu]    # beforehand, where PyPI is reachable
#
# Python: $GPU_CHECK_PYTHON, else the first of .venv/bin/python and python3 whose torch sees CUDA when the
# machine has an NVIDIA GPU, else the first that exists. When modules the check needs are missing
# (`python -m benchmarks.gpu_check --missing-modules`):
#   * with --wheels DIR (default: .whl/ when it exists), the wheels there are installed offline into a
#     scratch folder put on PYTHONPATH (a lent device reaches no package registry);
#   * otherwise the `make venv` equivalent with the gpu extra: .venv, torch 2.13.0, then '.[dev,gpu]', with
#     faiss-gpu-cu12 left owning the `faiss` module (faiss-cpu, a base dependency, installs the same module).
# --download-wheels DIR fetches, for Python ${GPU_CHECK_PYVER:-3.12} on x86-64, the wheels the device image
# lacks: jsonargparse, docstring-parser, typeshed-client and FAISS (--faiss gpu: faiss-gpu-cu12, ~46 MiB,
# which needs CUDA 12's cuBLAS on the device; --faiss cpu: faiss-cpu, ~18 MiB, GPU FAISS rows then skip).
# The total limit (--limit-s, default 540 s, counted from this script's start, the bootstrap included) stops
# the run; the Python script gets 30 s less for its parts.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

LIMIT_S=540
WHEELS=""
DOWNLOAD=""
FAISS_KIND=gpu
ARGS=()
while (($#)); do
  case "$1" in
    --wheels) WHEELS="${2:?--wheels needs a folder}"; shift 2 ;;
    --limit-s) LIMIT_S="${2:?--limit-s needs seconds}"; shift 2 ;;
    --download-wheels) DOWNLOAD="${2:?--download-wheels needs a folder}"; shift 2 ;;
    --faiss) FAISS_KIND="${2:?--faiss needs gpu or cpu}"; shift 2 ;;
    --) shift; ARGS+=("$@"); break ;;
    *) ARGS+=("$1"); shift ;;
  esac
done

if [[ -n "$DOWNLOAD" ]]; then
  case "$FAISS_KIND" in
    gpu) FAISS_PKG=faiss-gpu-cu12 ;;
    cpu) FAISS_PKG=faiss-cpu ;;
    *) echo "gpu_check.sh: --faiss $FAISS_KIND: use gpu or cpu" >&2; exit 2 ;;
  esac
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version "${GPU_CHECK_PYVER:-3.12}" \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$DOWNLOAD" \
    jsonargparse docstring-parser typeshed-client "$FAISS_PKG"
  du -sh "$DOWNLOAD"
  exit 0
fi

sees_cuda() { "$1" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; }

pick_python() {
  local candidates=() c
  [[ -x .venv/bin/python ]] && candidates+=(.venv/bin/python)
  command -v python3 >/dev/null && candidates+=(python3)
  if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
    for c in "${candidates[@]}"; do sees_cuda "$c" && { echo "$c"; return; }; done
  fi
  echo "${candidates[0]:-python3}"
}

PY="${GPU_CHECK_PYTHON:-$(pick_python)}"
missing() { "$PY" -m benchmarks.gpu_check --missing-modules; }
MISSING="$(missing)"
if [[ -z "$WHEELS" && -d .whl ]]; then WHEELS=.whl; fi

if [[ -n "$MISSING" && -n "$WHEELS" ]]; then
  echo "gpu_check.sh: installing the wheels in $WHEELS offline (missing: $MISSING)"
  SITE="${TMPDIR:-/tmp}/recframe-gpu-check-site"
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" \
    "$WHEELS"/*.whl
  export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
  MISSING="$(missing)"
elif [[ -n "$MISSING" ]]; then
  echo "gpu_check.sh: building .venv with the gpu extra (missing: $MISSING)"
  test -x .venv/bin/python || python3 -m venv .venv
  PY=.venv/bin/python
  "$PY" -m pip install -q --upgrade pip
  "$PY" -m pip install -q torch==2.13.0
  "$PY" -m pip install -q -e '.[dev,gpu]'
  "$PY" -m pip uninstall -q -y faiss-cpu                     # both wheels install the `faiss` module
  "$PY" -m pip install -q --force-reinstall --no-deps faiss-gpu-cu12
  MISSING="$(missing)"
fi
if [[ -n "$MISSING" ]]; then
  echo "gpu_check.sh: still missing: $MISSING; pass --wheels DIR (made with --download-wheels) or run" \
       "where PyPI is reachable" >&2
  exit 2
fi

"$PY" - <<'EOF' || true
import torch
try:
    import faiss
    gpus = faiss.get_num_gpus() if hasattr(faiss, "StandardGpuResources") else "no GPU build"
    print(f"gpu_check.sh: torch {torch.__version__}, CUDA {torch.cuda.is_available()}; "
          f"faiss {faiss.__version__}, FAISS GPUs: {gpus}")
except ImportError as exc:  # e.g. faiss-gpu-cu12 without CUDA 12's cuBLAS: the parts that need it say so
    print(f"gpu_check.sh: torch {torch.__version__}, CUDA {torch.cuda.is_available()}; faiss: {exc}")
EOF

LEFT_S=$((LIMIT_S - SECONDS))
if ((LEFT_S < 60)); then
  echo "gpu_check.sh: only ${LEFT_S} s of --limit-s ${LIMIT_S} left after the bootstrap; not started" >&2
  exit 3
fi
exec timeout --kill-after=10 "$LEFT_S" "$PY" -m benchmarks.gpu_check --time-limit "$((LEFT_S - 30))" "${ARGS[@]}"
