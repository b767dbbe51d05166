"""The benchmark's workload and how Batchscope runs it: the requests every row, the sweep and the decode-step
measurements share (``Workload``), and Batchscope's config and run for them (``engine_config``, ``run_engine``).
Units: tokens and blocks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from batchscope.engine.config import EngineConfig
from batchscope.inputs.workload import render_prompt, to_requests
from batchscope.model.models import LoadedModel
from batchscope.scheduling.block_manager import blocks_needed
from batchscope.steplog.records import TraceRecords

if TYPE_CHECKING:  # imported where used: transformers takes seconds to import
    from batchscope.model.runner import ModelRunner


@dataclass
class Workload:
    """The benchmark's requests: ``specs`` (engine request specs) and their prompts as token ids."""

    specs: list[dict]
    prompts: list[list[int]]
    max_tokens: int
    ignore_eos: bool

    @property
    def request_ids(self) -> list[str]:
        return [s["request_id"] for s in self.specs]


def make_workload(
    loaded: LoadedModel, specs: list[dict], num_requests: int | None = None, max_tokens: int | None = None
) -> Workload:
    """First ``num_requests`` specs, greedy, every ``max_tokens`` set to ``max_tokens`` (or their common value).

    Raises:
        ValueError: the specs sample (temperature > 0), mix ``ignore_eos`` settings, or differ in ``max_tokens``
            while no ``max_tokens`` override is given (transformers' continuous batching takes one value).
    """
    chosen = [dict(s) for s in specs[: num_requests or len(specs)]]
    for i, s in enumerate(chosen):
        s.setdefault("request_id", f"r{i}")
        if s.get("temperature", 0.0) != 0.0:
            raise ValueError(
                f"request {s['request_id']!r}: the benchmark compares greedy outputs; temperature must be 0"
            )
        if max_tokens is not None:
            s["max_tokens"] = max_tokens
    lengths = {s["max_tokens"] for s in chosen}
    if len(lengths) != 1:
        raise ValueError(f"max_tokens differs across requests ({sorted(lengths)}); pass --max-tokens")
    eos_flags = {bool(s.get("ignore_eos", False)) for s in chosen}
    if len(eos_flags) != 1:
        raise ValueError("ignore_eos differs across requests; the transformers rows take one setting")
    prompts = [render_prompt(s, loaded.tokenizer)[1] for s in chosen]
    return Workload(chosen, prompts, lengths.pop(), eos_flags.pop())


def engine_config(
    work: Workload, batching: str, max_num_seqs: int, max_num_batched_tokens: int, block_size: int
) -> EngineConfig:
    """Batchscope's config for a row: a pool where ``max_num_seqs`` worst-case requests fit (never preempts)."""
    per_request = blocks_needed(max(map(len, work.prompts)) + work.max_tokens, block_size)
    return EngineConfig(
        batching=batching,
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_num_batched_tokens,
        block_size=block_size,
        num_kv_blocks=max_num_seqs * per_request,
    )


def run_engine(
    loaded: LoadedModel, specs: list[dict], config: EngineConfig, time_forward: bool = False
) -> tuple[TraceRecords, ModelRunner]:
    """Run Batchscope on ``specs`` (``batchscope.engine.llm.build_engine``) and keep the runner for its forward
    timings."""
    from batchscope.engine.llm import build_engine
    from batchscope.model.runner import ModelRunner

    engine = build_engine(loaded, config)
    runner = engine.runner
    assert isinstance(runner, ModelRunner)
    runner.time_forward = time_forward
    return engine.run(to_requests(specs, loaded.tokenizer)), runner
