#!/usr/bin/env bash
# Set up ppx on a fresh machine. On a CPU-only machine this ends with a CPU build of torch
# (never a multi-GB CUDA build by accident); on a GPU machine with a CUDA build of torch that
# the driver runs (installed for the driver when torch is missing). A GPU machine with a
# CPU-only torch is a failure that says how to install the right build: "success" there would
# leave every device=cuda run failing later. The decision is scripts/torch_choice.py's.
#   bash scripts/setup.sh               set up
#   bash scripts/setup.sh --check-torch only print the torch decision (exit 3 on a failure)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
PIP="$PY -m pip"
TORCH=2.13.0
choice=$($PY scripts/torch_choice.py) || exit $?
[[ "${1:-}" == "--check-torch" ]] && { echo "$choice"; exit 0; }
case "$choice" in
  keep) ;;
  cpu)
    # a local wheel (find-links) first: it is the CPU build; else PyTorch's CPU index
    $PIP install --no-index "torch==$TORCH" 2>/dev/null \
      || $PIP install "torch==$TORCH" --index-url https://download.pytorch.org/whl/cpu ;;
  cuda\ *) $PIP install "torch==$TORCH" --index-url "${choice#cuda }" ;;
  *) echo "setup: unexpected torch decision '$choice'" >&2; exit 2 ;;
esac
$PIP install -q -e ".[dev,notebooks]"
# the post-mortem page's test renders it in headless Chromium (Debian's package)
if ! command -v chromium >/dev/null && command -v apt-get >/dev/null; then
  SUDO=$([[ $(id -u) == 0 ]] || echo sudo)
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq chromium
fi
$PY -c "import torch; print('setup: torch', torch.__version__, 'cuda' if torch.cuda.is_available() else 'cpu')"
