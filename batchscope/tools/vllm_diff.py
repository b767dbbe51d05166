"""``python -m batchscope vllm-diff``: does vLLM's own scheduler make the same decisions as Batchscope, step by step?

    python -m batchscope vllm-diff --scenario sixteen
    python -m batchscope vllm-diff --workload my.jsonl --max-num-seqs 2 --no-prefix-caching
    python -m batchscope vllm-diff --trace batchscope/assets/traces/seed-abcd-continuous.jsonl

Batchscope runs the workload on the model (or the trace is read), then vLLM 0.33.0's V1 scheduler runs the same
requests without a model in vLLM's own virtual environment (``python -m batchscope_vllm.driver``, a subprocess:
vLLM pins other torch and transformers versions), fed the tokens Batchscope sampled. The command prints
"agrees on all N steps" (exit 0) or the first differing step (exit 1) and how many steps differ. vLLM has no static
batching, so only continuous runs compare.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from batchscope.cli.flags import add_engine_flags, config_from_args

ROOT = Path(__file__).resolve().parents[2]  # the checkout (its .venv-vllm)
VLLM_PYTHON_ENV = "BATCHSCOPE_VLLM_PYTHON"


def add_vllm_diff(sub: argparse._SubParsersAction) -> None:
    """Entry point (``batchscope.commands``): the ``vllm-diff`` sub-command."""
    p = sub.add_parser("vllm-diff", help="compare a run with vLLM's own scheduler, step by step")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--scenario", help="a shipped scenario (see `python -m batchscope scenarios`)")
    src.add_argument("--workload", help="JSON Lines file, one request per line")
    src.add_argument("--trace", help="a recorded continuous trace (JSON Lines) instead of a new run")
    add_engine_flags(p)
    p.add_argument("--out", help="also write Batchscope's trace here (not with --trace)")
    p.add_argument(
        "--vllm-python",
        default=None,
        help=f"python of vLLM's venv (default: ${VLLM_PYTHON_ENV}, else .venv-vllm/bin/python in the project)",
    )
    p.set_defaults(handler=run_vllm_diff)


def vllm_python(explicit: str | None) -> Path:
    """The interpreter of vLLM's venv. Raises ``FileNotFoundError`` with what to do when there is none."""
    path = Path(explicit or os.environ.get(VLLM_PYTHON_ENV) or ROOT / ".venv-vllm" / "bin" / "python")
    if not path.exists():
        raise FileNotFoundError(
            f"vLLM's virtual environment is missing ({path} does not exist): run `make test-vllm` once to create it"
        )
    return path


def batchscope_records(args) -> list[dict]:
    """The trace to compare: read (``--trace``) or made by running the scenario or workload on the model."""
    from batchscope.steplog import trace

    if args.trace:
        return trace.read(args.trace)
    from batchscope.engine.llm import generate_trace
    from batchscope.inputs.workload import load_scenario, read_workload
    from batchscope.model.models import load_model

    if args.scenario:
        scenario = load_scenario(args.scenario)
        specs, overrides = scenario["requests"], scenario.get("config", {})
    else:
        specs, overrides = read_workload(args.workload), {}
    config = config_from_args(args, overrides)
    records = generate_trace(load_model(args.model, args.device, args.dtype), specs, config, scenario=args.scenario)
    if args.out:
        trace.write(records, args.out)
    return records


def run_driver(python: Path, workload: dict, timeout: float = 900) -> list[dict]:
    """vLLM's step records for ``workload`` (``batchscope_vllm.driver``, run by ``python`` in a subprocess)."""
    with tempfile.TemporaryDirectory(prefix="batchscope-vllm-diff-") as tmp:
        path = Path(tmp) / "workload.json"
        path.write_text(json.dumps(workload))
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        proc = subprocess.run(
            [str(python), "-m", "batchscope_vllm.driver", str(path)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-1:] or ["(no output)"]
        raise ChildProcessError(f"vLLM's driver failed (exit {proc.returncode}): {tail[0]}")
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


def run_vllm_diff(args) -> int:
    """Handler of ``vllm-diff``: 0 when every step agrees, 1 when a step differs (2: bad input, as elsewhere)."""
    from batchscope_vllm.compare import compare, first_difference, workload_from_trace

    python = vllm_python(args.vllm_python)  # fail fast, before a model run
    records = batchscope_records(args)
    batching = records[0].get("policy")  # the trace header records the batching mode as "policy"
    if batching != "continuous":
        raise ValueError(f"batching={batching!r}: vLLM has only continuous batching; compare a continuous run")
    if not all("prompt_token_ids" in r for r in records[0]["requests"]):
        print("note: the trace has no prompt token ids; prompts are synthesized (no shared prefixes)", file=sys.stderr)
    steps = run_driver(python, workload_from_trace(records))
    diffs = compare(records, steps)
    print(first_difference(records, steps))
    if diffs:
        print(f"{len(diffs)} difference(s) in all; vLLM ran {len(steps)} steps, Batchscope {len(records) - 2}")
    return 1 if diffs else 0
