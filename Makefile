# Two commands on a fresh machine: `make demo` and `make test`. Both create .venv themselves.
PYTHON  ?= python3
VENV    ?= .venv
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.installed
# Without a GPU, pin the CPU build of torch; otherwise pip pulls gigabytes of CUDA wheels.
HAS_GPU := $(shell command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && echo 1)
CONSTRAINT := $(if $(HAS_GPU),,constraints-cpu.txt)
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: demo test bench lint venv clean
venv: $(STAMP)

$(STAMP): pyproject.toml constraints-cpu.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	PIP_CONSTRAINT=$(CONSTRAINT) $(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/clew demo

test: $(STAMP)
	$(VENV)/bin/pytest -q

bench: $(STAMP)
	@for b in benchmarks/bench_*.py; do $(PY) $$b || exit 1; done

lint: $(STAMP)
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) build *.egg-info
