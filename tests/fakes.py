"""Model-free runners for scheduler tests: ``FakeRunner`` samples token 7, or EOS once a request reaches its scripted
length; ``ReplayRunner`` samples a recorded trace's output tokens again (``rerun``)."""

from __future__ import annotations

import itertools
import json
import warnings
from pathlib import Path

import torch
from conftest import step_records

from batchscope.engine.config import EngineConfig
from batchscope.engine.engine import LLMEngine
from batchscope.engine.request import Request, SamplingParams

EOS = 2


class FakeRunner:
    def __init__(self, natural_lengths: dict[str, int] | None = None):
        self.natural_lengths = natural_lengths or {}
        self.steps = []

    def execute(self, out, block_tables):
        self.steps.append(out)
        sampled = {}
        for s in out.scheduled:
            if s.samples:
                req = s.request
                n = self.natural_lengths.get(req.request_id)
                sampled[req.request_id] = [EOS if n is not None and len(req.output_token_ids) + 1 == n else 7]
        return sampled

    def release(self, request_id):
        pass


_TOKENS = itertools.count(100)


def make_request(
    rid: str, num_prompt_tokens: int, max_tokens: int, arrival_step: int | None = 0, priority: int = 0, **kw
) -> Request:
    """A request whose prompt tokens are distinct from every other made here (no two share a cached prefix)."""
    prompt = [next(_TOKENS) for _ in range(num_prompt_tokens)]
    return Request(
        rid, prompt, SamplingParams(max_tokens=max_tokens, **kw), arrival_step=arrival_step, priority=priority
    )


def run_fake(requests, natural_lengths=None, **config):
    cfg = EngineConfig(**config)
    runner = FakeRunner(natural_lengths)
    records = LLMEngine(runner, cfg, eos_token_ids={EOS}).run(requests)
    return step_records(records), {r["request_id"]: r for r in records[-1]["requests"]}, records


def table(steps):
    """Compact view of a schedule: per step, (request_id, kind, num_tokens) tuples."""
    return [[(s["request_id"], s["kind"], s["num_tokens"]) for s in st["scheduled"]] for st in steps]


class ReplayRunner:
    """Samples each request's recorded output tokens in order (greedy outputs do not depend on the batching)."""

    def __init__(self, outputs: dict[str, list[int]]):
        self.outputs = outputs

    def execute(self, out, block_tables):
        return {
            s.request.request_id: [self.outputs[s.request.request_id][len(s.request.output_token_ids)]]
            for s in out.scheduled
            if s.samples
        }

    def release(self, request_id):
        pass


def rerun(path: Path, **overrides) -> list[dict]:
    """A shipped trace's requests and output tokens, run again by the engine under ``overrides``."""
    records = [json.loads(line) for line in path.read_text().splitlines()]
    header, summary = records[0], records[-1]
    outputs = {r["request_id"]: r["output_token_ids"] for r in summary["requests"]}
    requests = [
        Request(
            r["request_id"],
            list(r["prompt_token_ids"]),
            SamplingParams(max_tokens=r["max_tokens"], ignore_eos=r.get("ignore_eos", False)),
            arrival_step=r.get("arrival_step") or 0,
            priority=r.get("priority", 0),
        )
        for r in header["requests"]
    ]
    settings = dict(header["config"])
    settings.update({k: v for k, v in settings.pop("speculative_config", {}).items() if k != "method"})
    config = EngineConfig(batching=header["policy"], **{**settings, **overrides})
    engine = LLMEngine(ReplayRunner(outputs), config, header["eos_token_ids"], max_model_len=header["max_model_len"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # priorities under FCFS
        return engine.run(requests)


class ScriptedModel:
    """A model-free runner for speculative decoding: the token after position p is ``script[p + 1]``, so
    verification keeps a draft iff it is the script's token there, then yields one more script token."""

    def __init__(self, script: list[int]):
        self.script = script

    def execute(self, out, block_tables):
        sampled = {}
        for s in out.scheduled:
            if s.samples:
                at, got = s.request.num_tokens, []
                for d in [*s.draft_token_ids, None]:
                    got.append(self.script[at + len(got)])
                    if got[-1] != d:
                        break
                sampled[s.request.request_id] = got
        return sampled

    def release(self, request_id):
        pass


def random_prompts(lengths: tuple[int, ...], seed: int) -> list[list[int]]:
    """Prompts of random token ids (2-127, below every test model's vocabulary), one per length, reproducible."""
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(2, 128, (n,), generator=g).tolist() for n in lengths]


def shared_stems() -> list[tuple[list[int], int]]:
    """(prompt, max_tokens): a 22-token stem before four prompts, and the stem alone twice: whole-block prefix hits
    and exact repeats (the reserving families' greedy-parity workload)."""
    stem, *rest = random_prompts((22, 5, 13, 3, 9), 1)
    return [(stem + p, m) for p, m in zip(rest, (10, 6, 14, 8))] + [(list(stem), 7), (list(stem), 5)]


def stem_requests(workload: list[tuple[list[int], int]]) -> list[Request]:
    """``shared_stems``' workload as requests r0, r1, ...: fixed lengths (ignore_eos), arriving over steps 0-2."""
    return [
        Request(f"r{i}", p, SamplingParams(max_tokens=m, ignore_eos=True), arrival_step=i % 3)
        for i, (p, m) in enumerate(workload)
    ]
