"""Command line: ``python -m engine run|scenarios`` here, and the tools' commands (``bench``, ``sweep``, ...).

    python -m engine scenarios
    python -m engine run --scenario seed-abcd --policy continuous --out t.jsonl
    python -m engine run --workload my.jsonl --max-num-seqs 2 --num-kv-blocks 32 --out t.jsonl
    python -m engine bench [--num-requests 4 --max-tokens 32 --rounds 2 --max-num-seqs 4]   (package bench)
    python -m engine sweep [--num-requests 32 --mean-tokens 32 --sigmas 0 0.5 1 1.5 2]       (package bench)

Tools beside the engine add their commands through the ``batchscope.commands`` entry points (see
``pyproject.toml``): each entry point is a function ``add_parser(subparsers)`` that adds one sub-command and sets
its ``handler(args) -> int``. The engine never imports them by name.

Bad input exits with status 2 and one line on stderr that names the field and the allowed range.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from dataclasses import fields
from importlib.metadata import entry_points

from engine.config import LIMITS, EngineConfig
from engine.policies import SCHEDULERS
from engine.request_queue import QUEUES


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m engine", description="Batchscope: a small, real LLM serving engine.")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("scenarios", help="list the shipped scenarios")
    run = sub.add_parser("run", help="run a scenario or workload and write its trace (JSON Lines)")
    src = run.add_mutually_exclusive_group(required=True)
    src.add_argument("--scenario", help="a shipped scenario (see `python -m engine scenarios`)")
    src.add_argument("--workload", help="JSON Lines file, one request per line (see docs/trace-format.md)")
    run.add_argument("--out", required=True, help="trace file to write")
    add_engine_flags(run)
    for ep in entry_points(group="batchscope.commands"):
        if ep.name not in sub.choices:  # an editable and a plain install of the same tools list them twice
            ep.load()(sub)
    return p


def add_engine_flags(parser: argparse.ArgumentParser) -> None:
    """The engine's knobs as flags (``run`` and the tools' commands share them); read back by ``config_from_args``."""
    parser.add_argument("--policy", choices=list(SCHEDULERS), default="continuous")
    for name, (lo, hi) in LIMITS.items():
        parser.add_argument("--" + name.replace("_", "-"), type=int, default=None, help=f"integer in [{lo}, {hi}]")
    parser.add_argument("--no-chunked-prefill", action="store_true", help="never split a prompt across steps")
    parser.add_argument(
        "--scheduling-policy", choices=list(QUEUES), default=None, help="waiting-queue order (default fcfs)"
    )
    parser.add_argument(
        "--no-prefix-caching", action="store_true", help="turn automatic prefix caching off (vLLM: on by default)"
    )
    parser.add_argument(
        "--no-reserve-full-prompt",
        action="store_true",
        help="admit a request when its first chunk fits, not its whole prompt (vLLM's scheduler_reserve_full_isl)",
    )
    parser.add_argument(
        "--model", default="SmolLM2-135M-Instruct", help="HF causal-LM id (in the local cache) or local folder"
    )
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda if available)")


def config_from_args(args, overrides: dict) -> EngineConfig:
    """The ``EngineConfig`` of a scenario's or workload's ``overrides`` with the command's flags on top."""
    cfg: dict = {f.name: f.default for f in fields(EngineConfig)}
    cfg.update(overrides)
    for name in LIMITS:
        if getattr(args, name) is not None:
            cfg[name] = getattr(args, name)
    flags = {
        "enable_chunked_prefill": args.no_chunked_prefill,
        "enable_prefix_caching": args.no_prefix_caching,
        "reserve_full_prompt": args.no_reserve_full_prompt,
    }
    cfg.update({name: False for name, off in flags.items() if off})
    if args.scheduling_policy is not None:
        cfg["scheduling_policy"] = args.scheduling_policy
    cfg["policy"] = args.policy
    config = EngineConfig(**cfg)
    config.validate()
    return config


def _run(args) -> None:
    from tqdm import tqdm

    from engine.engine import validate_request
    from engine.llm import generate_trace
    from engine.models import load_model
    from engine.workload import load_scenario, read_workload, to_requests

    if args.scenario:
        scenario = load_scenario(args.scenario)
        specs, overrides = scenario["requests"], scenario.get("config", {})
    else:
        specs, overrides = read_workload(args.workload), {}
    config = config_from_args(args, overrides)
    loaded = load_model(args.model, args.device)
    max_len = getattr(loaded.model.config, "max_position_embeddings", None)
    for req in to_requests(specs, loaded.tokenizer):  # fail in seconds, before any step runs
        validate_request(req, config, max_len)
    bar = tqdm(desc=f"{args.policy} steps", unit="step", file=sys.stderr)
    finished = 0

    def on_step(record: dict) -> None:
        nonlocal finished
        finished += len(record["finished"])
        bar.set_postfix(finished=f"{finished}/{len(specs)}", tokens=record["num_batched_tokens"])
        bar.update(1)

    records = generate_trace(loaded, specs, config, scenario=args.scenario, on_step=on_step)
    bar.close()
    from steplog import trace

    trace.write(records, args.out)
    print(f"wrote {args.out}: {len(records) - 2} steps, {len(specs)} requests ({args.policy})", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    warnings.showwarning = _one_line_warning
    args = _parser().parse_args(argv)
    try:
        if args.command == "scenarios":
            from engine.workload import list_scenarios

            for name, desc in list_scenarios().items():
                print(f"{name:12s} {desc}")
            return 0
        if args.command == "run":
            _run(args)
            return 0
        return args.handler(args)
    except (ValueError, OSError) as exc:  # RequestError, WorkloadError, ModelLoadError, TraceError, config errors
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _one_line_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Warnings (e.g. a priority ignored under FCFS) as one line on stderr, like the errors."""
    print(f"warning: {message}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
