"""Run one workload through Batchscope's scheduler and through vLLM's, with the same sampled tokens.

Batchscope's scheduler, block manager and engine loop are pure Python, so they run here in vLLM's venv. The model
is replaced by ``ReplayRunner``, which samples each request's recorded output tokens in order: the tokens a real
run produced (a shared case recorded by ``scripts/record-case-tokens.py``, a shipped trace's summary) or a fake
model's. Greedy and seeded outputs do not depend on how requests are batched, so one recording serves every config.
Then the Batchscope trace is turned into vLLM's workload (``batchscope_vllm.compare.workload_from_trace``: prompts,
outputs, EOS ids, arrivals) and vLLM's scheduler runs it (``batchscope_vllm.driver.run_vllm``).
"""

from __future__ import annotations

import warnings
from typing import Any

from batchscope.engine.config import EngineConfig
from batchscope.engine.engine import LLMEngine
from batchscope.engine.request import Request, SamplingParams
from batchscope.engine.validation import PriorityIgnoredWarning
from batchscope_vllm.compare import workload_from_trace
from batchscope_vllm.driver import run_vllm


class ReplayRunner:
    """Samples ``outputs[request_id]`` token by token, whenever a scheduled request reaches its known tokens (with
    drafts, the accepted ones and one more)."""

    def __init__(self, outputs: dict[str, list[int]]):
        self.outputs = outputs

    def execute(self, out, block_tables) -> dict[str, list[int]]:
        """The next recorded token of each request that samples; with drafts, greedy verification against the
        recording: drafts kept while they equal the next recorded tokens, then one more recorded token."""
        sampled = {}
        for s in out.scheduled:
            if s.samples:
                req = s.request
                todo = self.outputs[req.request_id][len(req.output_token_ids) :]
                kept = 0
                while kept < len(s.draft_token_ids) and kept < len(todo) and todo[kept] == s.draft_token_ids[kept]:
                    kept += 1
                sampled[req.request_id] = todo[: kept + 1]
        return sampled

    def release(self, request_id: str) -> None:
        pass


def run_batchscope(
    requests: list[dict[str, Any]], config: dict[str, Any], eos: list[int], max_model_len: int | None = None
) -> list[dict]:
    """Batchscope's trace records. ``requests``: request_id, prompt_token_ids, max_tokens, ignore_eos,
    arrival_step, output_token_ids, optional priority and abort_step; ``config``: ``EngineConfig`` fields."""
    reqs = [
        Request(
            r["request_id"],
            list(r["prompt_token_ids"]),
            SamplingParams(max_tokens=r["max_tokens"], ignore_eos=bool(r.get("ignore_eos", False))),
            arrival_step=r.get("arrival_step", 0),
            priority=r.get("priority", 0),
            abort_step=r.get("abort_step"),
        )
        for r in requests
    ]
    outputs = {r["request_id"]: list(r["output_token_ids"]) for r in requests}
    engine = LLMEngine(ReplayRunner(outputs), EngineConfig(**config), eos_token_ids=eos, max_model_len=max_model_len)
    with warnings.catch_warnings():  # random workloads give priorities under FCFS too, on purpose
        warnings.simplefilter("ignore", PriorityIgnoredWarning)
        return engine.run(reqs)


def run_both(
    requests: list[dict[str, Any]], config: dict[str, Any], eos: list[int], max_model_len: int | None = None
) -> tuple[list[dict], list[dict]]:
    """(Batchscope's trace records, vLLM's step records) for the same workload and sampled tokens."""
    records = run_batchscope(requests, config, eos, max_model_len)
    return records, run_vllm(workload_from_trace(records))


def shipped_workload(records: list[dict], rules: dict[str, Any]) -> tuple[list[dict], dict[str, Any], list[int], Any]:
    """A shipped trace's requests with their recorded output tokens, and its config under ``rules`` (continuous
    batching): ``(requests, config, eos_token_ids, max_model_len)`` for ``run_batchscope`` / ``run_both``."""
    header, *_, summary = records
    outputs = {r["request_id"]: r["output_token_ids"] for r in summary["requests"]}
    requests = [
        {**r, "arrival_step": r.get("arrival_step") or 0, "output_token_ids": outputs[r["request_id"]]}
        for r in header["requests"]
    ]
    config = {**header["config"], **rules, "batching": "continuous"}
    return requests, config, header["eos_token_ids"], header["max_model_len"]
