"""Shared fixtures: a tiny random Llama (float64, fast, no numerical near-ties) and the real default model."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import NamedTuple

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# One intra-op thread per test process: `make test` runs a pytest-xdist worker per core beside the vLLM and SGLang
# suites, and PyTorch's default (a thread per core in every worker) oversubscribes the cores, where each operation
# waits for its slowest thread (batchscope/engine/threads.py measured a step 3x slower so). The engine's runs use
# batchscope.engine.threads' count; this sets the count of everything else (transformers' generate, the references).
torch.set_num_threads(1)

ROOT = Path(__file__).resolve().parents[1]  # the repository

# Copies of ../shared/cases/*.jsonl (reference cases from public bug reports of real engines; see that README).
CASES = Path(__file__).resolve().parent / "cases"


def case_workload(name: str) -> list[dict]:
    """The request specs of reference case ``name`` (shared/cases/NAME.jsonl)."""
    return [json.loads(line) for line in (CASES / f"{name}.jsonl").read_text().splitlines() if line.strip()]


# `make test-fast` (BATCHSCOPE_TEST_TIER=fast): the property tests draw a tenth of their examples, for every edit;
# `make test` (CI) draws them all.
FAST_TIER = os.environ.get("BATCHSCOPE_TEST_TIER") == "fast"


def examples(n: int) -> int:
    """A property test's ``max_examples``: ``n``, or a tenth of it (at least 20) in the fast tier."""
    return max(20, n // 10) if FAST_TIER else n


RECORDED = ROOT / "batchscope" / "assets" / "traces"  # the shipped traces, recorded on SmolLM2
RECORDED_TRACES = sorted(RECORDED.glob("*.jsonl"))


class Parts(NamedTuple):
    """A trace's records by kind: its header, its step records in order, its summary."""

    header: dict
    steps: list[dict]
    summary: dict


def step_records(records: list[dict]) -> list[dict]:
    """The step records of a whole trace (between its header and its summary)."""
    return records[1:-1]


def parts(records: list[dict]) -> Parts:
    """A whole trace's records as (header, steps, summary)."""
    return Parts(records[0], step_records(records), records[-1])


def recorded_path(scenario: str, policy: str) -> Path:
    """The shipped trace of ``scenario`` under ``policy`` (``seed-abcd``, ``continuous``)."""
    return RECORDED / f"{scenario}-{policy}.jsonl"


def recorded(scenario: str, policy: str) -> Parts:
    """A shipped trace as its raw JSON lines (no reader in between, so a test can check a reader against it), by
    kind: ``header, steps, summary = recorded("seed-abcd", "continuous")``."""
    return parts([json.loads(line) for line in recorded_path(scenario, policy).read_text().splitlines()])


def recorded_pair(scenario: str) -> list:
    """The shipped pair of ``scenario`` the app compares it as, as ``TraceView``s: static and continuous (static
    first), or continuous and sglang for the scenario made to show vLLM's and SGLang's schedulers apart
    (``batchscope.explain.stories.default_pair``)."""
    from batchscope.explain.stories import default_pair
    from batchscope.steplog import trace
    from batchscope.steplog.view import TraceView

    return [TraceView(trace.read(RECORDED / f"{scenario}-{p}.jsonl")) for p in default_pair(scenario)]


@pytest.fixture(scope="session")
def tiny_model():
    """A 2-layer random Llama (GQA 4/2 heads) in float64, so our kernel and HF's cannot flip a near-tie."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        pad_token_id=0,
        bos_token_id=None,
        eos_token_id=1,
    )
    return LlamaForCausalLM(cfg).to(torch.float64).eval()


@pytest.fixture(scope="session")
def smollm():
    """The default model, SmolLM2-135M-Instruct (float32 on CPU), loaded once."""
    from batchscope.model.models import load_model

    return load_model(device="cpu")


def hf_greedy(model, prompt_ids: list[int], max_new_tokens: int, eos_token_id=None) -> list[int]:
    """Reference: transformers ``generate`` (greedy), one request alone, its own DynamicCache and SDPA."""
    with torch.inference_mode():
        out = model.generate(
            torch.tensor([prompt_ids], device=model.device),
            max_new_tokens=max_new_tokens,
            do_sample=False,
            eos_token_id=eos_token_id,
            pad_token_id=0,
            min_new_tokens=0 if eos_token_id is not None else max_new_tokens,
        )
    return out[0, len(prompt_ids) :].tolist()


@pytest.fixture(scope="session")
def browser():
    """Debian's Chromium, headless, through Playwright (batchscope/tools/app_server.py), shared by the browser tests."""
    from playwright.sync_api import sync_playwright

    from batchscope.tools.app_server import launch_chromium

    with sync_playwright() as p:
        b = launch_chromium(p)
        yield b
        b.close()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that takes the default model (the ``smollm`` fixture) is a ``real_model`` test, marked or not: the
    fast tier (``make test-fast``) leaves them out."""
    for item in items:
        if "smollm" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.real_model)
