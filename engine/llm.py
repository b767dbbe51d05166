"""The one place an engine is built from a loaded model and a config, and the one-call entry point on top of it."""

from __future__ import annotations

from collections.abc import Callable

from engine.config import EngineConfig
from engine.engine import LLMEngine
from engine.model_runner import ModelRunner
from engine.models import LoadedModel
from engine.workload import to_requests
from steplog.records import StepRecord, TraceRecords


def eos_token_ids(loaded: LoadedModel) -> set[int]:
    """EOS ids from the generation config (int or list) and the tokenizer."""
    ids: set[int] = set()
    for source in (loaded.model.generation_config.eos_token_id, getattr(loaded.tokenizer, "eos_token_id", None)):
        if isinstance(source, int):
            ids.add(source)
        elif source:
            ids.update(source)
    return ids


def build_engine(loaded: LoadedModel, config: EngineConfig, scenario: str | None = None) -> LLMEngine:
    """An ``LLMEngine`` on ``loaded`` (a fresh ``ModelRunner`` and KV pool) under ``config``.

    Raises:
        engine.config.ConfigError: a setting out of range.
    """
    tok = loaded.tokenizer
    return LLMEngine(
        ModelRunner(loaded.model, config, loaded.device),
        config,
        eos_token_ids=eos_token_ids(loaded),
        decode=(lambda ids: tok.decode(ids, skip_special_tokens=False)) if tok else None,
        max_model_len=getattr(loaded.model.config, "max_position_embeddings", None),
        meta={
            "model": loaded.name,
            "device": str(loaded.device),
            "dtype": str(loaded.dtype).replace("torch.", ""),
            "scenario": scenario,
        },
    )


def generate_trace(
    loaded: LoadedModel,
    specs: list[dict],
    config: EngineConfig,
    scenario: str | None = None,
    on_step: Callable[[StepRecord], None] | None = None,
) -> TraceRecords:
    """Run ``specs`` (see ``engine.workload``) to completion and return the trace records.

    Raises:
        engine.engine.RequestError / engine.workload.WorkloadError: bad input, before anything runs.
    """
    requests = to_requests(specs, loaded.tokenizer)
    return build_engine(loaded, config, scenario).run(requests, on_step=on_step)
