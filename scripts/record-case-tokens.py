"""Record the shared cases' prompt token ids and real outputs for the vLLM fidelity tests (tests_vllm/cases.json).

The vLLM venv has neither torch nor the tokenizer, so the fidelity tests replay the cases from this file: each
case's prompts as SmolLM2 token ids (chat template applied) and each request's output tokens from one real run of
the default model here. Greedy and seeded outputs do not depend on batching, chunking or caching
(tests/engine/test_model_runner.py, tests/shared_cases/test_cases_c_on_smollm2.py), so one run per case serves every
config. Wall-clock arrivals of the case texts become the step-clock arrivals the texts give (c07: Z after X's
prefill = step 1; c09: B at step 6).

    .venv/bin/python scripts/record-case-tokens.py          # ~1 minute on 2 CPU cores
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from batchscope.engine.config import EngineConfig  # noqa: E402
from batchscope.engine.llm import build_engine, eos_token_ids  # noqa: E402
from batchscope.inputs.workload import read_workload, to_requests  # noqa: E402
from batchscope.model.models import load_model  # noqa: E402

B4 = {"block_size": 4}
# case -> (arrival steps to set, {run name: EngineConfig fields}), as the case texts in ../shared/cases give them
CASES = {
    "c01": (
        {},
        {
            "a": {**B4, "num_kv_blocks": 14, "max_num_batched_tokens": 16, "max_num_seqs": 2},
            "big-budget": {**B4, "num_kv_blocks": 14, "max_num_batched_tokens": 64, "max_num_seqs": 2},
        },
    ),
    "c02": (
        {},
        {
            "control": {
                **B4,
                "num_kv_blocks": 32,
                "max_num_batched_tokens": 37,
                "max_num_seqs": 2,
                "enable_chunked_prefill": False,
            }
        },
    ),
    "c07": (
        {"X": 0, "Y": 0, "Z": 1},
        {"a": {**B4, "num_kv_blocks": 32, "max_num_batched_tokens": 128, "max_num_seqs": 3}},
    ),
    "c08": (
        {},
        {
            "a": {**B4, "num_kv_blocks": 64, "max_num_batched_tokens": 512, "max_num_seqs": 1},
            "b": {**B4, "num_kv_blocks": 64, "max_num_batched_tokens": 512, "max_num_seqs": 4},
            "c": {**B4, "num_kv_blocks": 64, "max_num_batched_tokens": 8, "max_num_seqs": 4},
        },
    ),
    "c09": ({"A": 0, "B": 6}, {"a": {**B4, "num_kv_blocks": 32, "max_num_batched_tokens": 16, "max_num_seqs": 2}}),
    "c10": ({}, {"a": {**B4, "num_kv_blocks": 16, "max_num_batched_tokens": 64, "max_num_seqs": 4}}),
    "c12": ({}, {"a": {**B4, "num_kv_blocks": 64, "max_num_batched_tokens": 256, "max_num_seqs": 5}}),
    "c13": ({}, {"a": {**B4, "num_kv_blocks": 32, "max_num_batched_tokens": 128, "max_num_seqs": 2}}),
    "d03": ({}, {"a": {**B4, "num_kv_blocks": 32, "max_num_batched_tokens": 37, "max_num_seqs": 2}}),
    "d04": ({}, {"a": {**B4, "num_kv_blocks": 32, "max_num_batched_tokens": 64, "max_num_seqs": 2}}),
    "d06": ({}, {"a": {**B4, "num_kv_blocks": 64, "max_num_batched_tokens": 128, "max_num_seqs": 2}}),
    "d08": ({}, {"a": {**B4, "num_kv_blocks": 21, "max_num_batched_tokens": 128, "max_num_seqs": 3}}),
}


def record_case(loaded, name: str, arrivals: dict[str, int], runs: dict[str, dict]) -> dict:
    specs = read_workload(ROOT / "tests" / "cases" / f"{name}.jsonl")
    for spec in specs:
        spec["arrival_time"] = 0.0
        spec["arrival_step"] = arrivals.get(spec["request_id"], spec.get("arrival_step", 0))
    config = EngineConfig(**next(iter(runs.values())))
    records = build_engine(loaded, config).run(to_requests(specs, loaded.tokenizer))
    outputs = {r["request_id"]: r["output_token_ids"] for r in records[-1]["requests"]}
    return {
        "runs": runs,
        "requests": [
            {
                "request_id": r["request_id"],
                "prompt_token_ids": r["prompt_token_ids"],
                "max_tokens": r["max_tokens"],
                "ignore_eos": r["ignore_eos"],
                "arrival_step": r["arrival_step"],
                "output_token_ids": outputs[r["request_id"]],
            }
            for r in records[0]["requests"]
        ],
    }


def main() -> None:
    loaded = load_model(device="cpu")
    out = {
        "model": loaded.name,
        "eos_token_ids": sorted(eos_token_ids(loaded)),
        "max_model_len": loaded.model.config.max_position_embeddings,
        "cases": {name: record_case(loaded, name, arrivals, runs) for name, (arrivals, runs) in CASES.items()},
    }
    path = ROOT / "tests_vllm" / "cases.json"
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
