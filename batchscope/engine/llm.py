"""The one place an engine is built from a loaded model and a config, and the one-call entry point on top of it."""

from __future__ import annotations

from collections.abc import Callable

from batchscope.engine.config import EngineConfig
from batchscope.engine.engine import LLMEngine
from batchscope.engine.request import Request
from batchscope.engine.validation import validate_request
from batchscope.inputs.workload import to_requests
from batchscope.model.models import LoadedModel, device_name
from batchscope.model.runner import ModelRunner
from batchscope.steplog.records import StepRecord, TraceRecords


def model_limits(loaded: LoadedModel) -> tuple[int | None, int | None]:
    """(context length, vocabulary size) of the model, in tokens (``None`` where its config does not say)."""
    cfg = loaded.model.config
    return getattr(cfg, "max_position_embeddings", None), getattr(cfg, "vocab_size", None)


def validate_requests(loaded: LoadedModel, requests: list[Request], config: EngineConfig) -> None:
    """``validate_request`` for each request against this model's context and vocabulary (before any step runs).

    Raises:
        batchscope.engine.validation.RequestError: the first request that could never run, in one line.
    """
    max_len, vocab = model_limits(loaded)
    for req in requests:
        validate_request(req, config, max_len, vocab)


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
        batchscope.engine.config.ConfigError: a setting out of range.
    """
    tok = loaded.tokenizer
    max_len, vocab = model_limits(loaded)
    return LLMEngine(
        ModelRunner(loaded.model, config, loaded.device),
        config,
        eos_token_ids=eos_token_ids(loaded),
        decode=(lambda ids: tok.decode(ids, skip_special_tokens=False)) if tok else None,
        max_model_len=max_len,
        vocab_size=vocab,
        meta={
            "model": loaded.name,
            "device": str(loaded.device),
            "device_name": device_name(loaded.device),
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
    seed: int | None = None,
    should_stop: Callable[[], bool] | None = None,
    on_engine: Callable[[LLMEngine], None] | None = None,
) -> TraceRecords:
    """Run ``specs`` (see ``batchscope.inputs.workload``) to completion and return the trace records.

    ``seed`` and ``should_stop``: see ``LLMEngine.run`` (a fresh seed per run unless given; stop between steps,
    keeping a partial trace). ``on_engine``: called with the engine before it runs (the Playground keeps it to
    cancel one request, ``LLMEngine.abort``, from another thread).

    Raises:
        batchscope.engine.engine.RequestError / batchscope.inputs.workload.WorkloadError: bad input, before anything
    runs.
    """
    requests = to_requests(specs, loaded.tokenizer)
    engine = build_engine(loaded, config, scenario)
    if on_engine is not None:
        on_engine(engine)
    return engine.run(requests, on_step=on_step, seed=seed, should_stop=should_stop)
