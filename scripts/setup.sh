#!/usr/bin/env bash
# Set up ppx on a fresh machine. On a CPU-only machine this ends with a CPU build of torch
# (never a multi-GB CUDA build by accident); on a GPU machine the user's own torch is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
PIP="$PY -m pip"
has_gpu() { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; }
if $PY -c "import torch" >/dev/null 2>&1; then
  echo "setup: keeping the installed torch $($PY -c 'import torch; print(torch.__version__)')"
elif has_gpu; then
  echo "setup: GPU found and no torch: installing torch==2.13.0 (CUDA build)"
  $PIP install "torch==2.13.0"
else
  echo "setup: no GPU: installing the CPU build of torch==2.13.0"
  # a local wheel (find-links) first: it is the CPU build; else PyTorch's CPU index
  $PIP install --no-index "torch==2.13.0" 2>/dev/null \
    || $PIP install "torch==2.13.0" --index-url https://download.pytorch.org/whl/cpu
fi
$PIP install -q -e ".[dev,notebooks]"
$PY -c "import torch; print('setup: torch', torch.__version__, 'cuda' if torch.cuda.is_available() else 'cpu')"
