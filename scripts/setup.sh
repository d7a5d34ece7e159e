#!/usr/bin/env bash
# Creates .venv and installs dagrag with its dev tools. Safe to re-run.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
pip_install() { .venv/bin/python -m pip install --disable-pip-version-check -q "$@"; }
# Torch first, pinned: otherwise sentence-transformers pulls the newest torch, a multi-GB CUDA build.
# Set TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu to take the CPU build from PyTorch's index.
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  pip_install "torch==2.13.0" ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"}
fi
pip_install -e ".[dev]"
echo "dagrag installed in .venv ($(.venv/bin/python -c 'import dagrag, sys; print(sys.version.split()[0])'))"
