"""Print the Fidelity table of docs/fidelity/vllm.md: steps (and preemptions) of every shipped scenario and shared
case under the four rule combinations, and whether vLLM 0.33.0's scheduler agrees on every step. Run in vLLM's venv:

    .venv-vllm/bin/python scripts/fidelity-table.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests_vllm")]

from replay import run_both  # noqa: E402

from batchscope_vllm.compare import compare  # noqa: E402

COMBOS = {  # (reserve_full_prompt, enable_prefix_caching)
    "full prompt, caching": (True, True),
    "full prompt, no caching": (True, False),
    "first chunk, caching": (False, True),
    "first chunk, no caching": (False, False),
}


def cell(requests, config, eos, max_len) -> str:
    """``steps (preemptions⟲) ✓`` when vLLM agrees on every step, ✗ otherwise."""
    records, steps = run_both(requests, config, eos, max_len)
    preempted = sum(len(st["preempted"]) for st in records[1:-1])
    return f"{len(records) - 2}{f' ({preempted}⟲)' if preempted else ''} {'✓' if not compare(records, steps) else '✗'}"


def rows():
    for path in sorted((ROOT / "batchscope" / "assets" / "traces").glob("*-continuous.jsonl")):
        header, *_, summary = [json.loads(line) for line in path.read_text().splitlines()]
        outputs = {r["request_id"]: r["output_token_ids"] for r in summary["requests"]}
        reqs = [
            {**r, "arrival_step": r.get("arrival_step") or 0, "output_token_ids": outputs[r["request_id"]]}
            for r in header["requests"]
        ]
        name = f"scenario `{header['scenario']}`" + (
            f" ({header['config']['scheduling_policy']})" if header["config"]["scheduling_policy"] != "fcfs" else ""
        )
        yield (
            name,
            [
                cell(
                    reqs,
                    {**header["config"], "reserve_full_prompt": f, "enable_prefix_caching": c},
                    header["eos_token_ids"],
                    header["max_model_len"],
                )
                for f, c in COMBOS.values()
            ],
        )
    fixture = json.loads((ROOT / "tests_vllm" / "cases.json").read_text())
    for case, spec in fixture["cases"].items():
        for run, config in spec["runs"].items():
            label = f"case {case}" + ("" if len(spec["runs"]) == 1 else f" ({run})")
            yield (
                label,
                [
                    cell(
                        spec["requests"],
                        {**config, "reserve_full_prompt": f, "enable_prefix_caching": c},
                        fixture["eos_token_ids"],
                        fixture["max_model_len"],
                    )
                    for f, c in COMBOS.values()
                ],
            )


def main() -> None:
    print("| run | " + " | ".join(COMBOS) + " |")
    print("|---|" + "---|" * len(COMBOS))
    for name, cells in rows():
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
