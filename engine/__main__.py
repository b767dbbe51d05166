"""Command line: ``python -m engine run|scenarios`` here, and the tools' commands (``bench``, ``sweep``, ...).

    python -m engine scenarios
    python -m engine run --scenario seed-abcd --policy continuous --out t.jsonl
    python -m engine run --workload my.jsonl --max-num-seqs 2 --num-kv-blocks 32 --out t.jsonl
    python -m engine bench [--num-requests 4 --max-tokens 32 --rounds 2 --max-num-seqs 4]   (package bench)
    python -m engine sweep [--num-requests 32 --mean-tokens 32 --sigmas 0 0.5 1 1.5 2]       (package bench)
    python -m engine vllm-diff --scenario sixteen | --workload FILE | --trace FILE        (package bench)

Tools beside the engine add their commands through the ``batchscope.commands`` entry points (see
``pyproject.toml``): each entry point is a function ``add_parser(subparsers)`` that adds one sub-command and sets
its ``handler(args) -> int``. The engine never imports them by name.

Bad input exits with status 2 and one line on stderr that names the field and the allowed range.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from importlib.metadata import entry_points

from engine.flags import add_engine_flags, config_from_args
from steplog.records import StepRecord


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


def _run(args) -> None:
    from tqdm import tqdm

    from engine.engine import PriorityIgnoredWarning, priority_ignored_message, validate_request
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
    requests = to_requests(specs, loaded.tokenizer)
    for req in requests:  # fail in seconds, before any step runs
        validate_request(req, config, max_len)
    ignored = priority_ignored_message(requests, config)
    if ignored:  # said once here, on its own line (the engine's warning would land inside the progress bar)
        print(f"warning: {ignored}", file=sys.stderr)
    bar = tqdm(desc=f"{args.policy} steps", unit="step", file=sys.stderr)
    finished = 0

    def on_step(record: StepRecord) -> None:
        nonlocal finished
        finished += len(record["finished"])
        bar.set_postfix(finished=f"{finished}/{len(specs)}", tokens=record["num_batched_tokens"])
        bar.update(1)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PriorityIgnoredWarning)
        records = generate_trace(loaded, specs, config, scenario=args.scenario, on_step=on_step)
    bar.close()
    from steplog import trace

    trace.write(records, args.out)
    print(f"wrote {args.out}: {len(records) - 2} steps, {len(specs)} requests ({args.policy})", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "scenarios":
            from engine.workload import list_scenarios

            for name, desc in list_scenarios().items():
                print(f"{name:14s} {desc}")
            return 0
        if args.command == "run":
            _run(args)
            return 0
        return args.handler(args)
    except (ValueError, OSError) as exc:  # RequestError, WorkloadError, ModelLoadError, TraceError, config errors
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
