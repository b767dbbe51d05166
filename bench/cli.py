"""The benchmark tools' commands, added to ``python -m engine`` through the ``batchscope.commands`` entry points:

    python -m engine bench [--num-requests 4 --max-tokens 32 --rounds 2 --max-num-seqs 4]
    python -m engine sweep [--num-requests 32 --mean-tokens 32 --sigmas 0 0.5 1 1.5 2]

A bad flag value raises ``ValueError`` (the CLI prints one line and exits 2); greedy outputs that differ across
rows exit 1 (not bad input: the engines disagree, which the benchmark must not hide).
"""

from __future__ import annotations

import sys

from engine.config import LIMITS

BENCH_RANGES = {
    "num_requests": (1, 10_000),
    "max_tokens": (1, 100_000),
    "rounds": (1, 20),
    "step_tokens": (2, 4096),
    "max_num_batched_tokens": LIMITS["max_num_batched_tokens"],
    "block_size": LIMITS["block_size"],
    "max_num_seqs": LIMITS["max_num_seqs"],
    "step_batches": LIMITS["max_num_seqs"],
    "mean_tokens": (1, 100_000),
    "seed": (0, 2**31 - 1),
}


def add_bench(sub) -> None:
    """Entry point: the ``bench`` command."""
    from bench.rows import ROW_TITLES

    b = sub.add_parser("bench", help="Batchscope vs transformers on one workload (tokens/s, decode step, parity)")
    src = b.add_mutually_exclusive_group()
    src.add_argument("--scenario", default="sixteen", help="shipped scenario (default: sixteen)")
    src.add_argument("--workload", help="JSON Lines workload instead of a scenario")
    b.add_argument("--num-requests", type=int, help="use only the first N requests; integer in [1, 10000]")
    b.add_argument("--max-tokens", type=int, help="override every request's max_tokens; integer in [1, 100000]")
    b.add_argument("--rounds", type=int, default=2, help="interleaved rounds (A..E, E..A, ...); integer in [1, 20]")
    b.add_argument("--max-num-seqs", type=int, nargs="+", default=[4, 16], help="slot counts to compare (4 16)")
    b.add_argument("--max-num-batched-tokens", type=int, default=None, help="token budget (default: the scenario's)")
    b.add_argument("--block-size", type=int, default=16, help="Batchscope KV block size in tokens")
    b.add_argument("--step-batches", type=int, nargs="+", default=[1, 4, 16], help="batches for the decode-step time")
    b.add_argument("--step-tokens", type=int, default=32, help="tokens per request in the decode-step runs")
    b.add_argument("--rows", nargs="+", choices=list(ROW_TITLES), default=list(ROW_TITLES), help="rows to run")
    b.add_argument(
        "--parity",
        choices=["auto", "strict", "report"],
        default="auto",
        help="strict: differing greedy outputs fail the run; auto: strict unless 16-bit floats",
    )
    b.add_argument("--model", default="SmolLM2-135M-Instruct")
    b.add_argument("--device", default=None, help="cpu or cuda (default: cuda if available)")
    b.add_argument("--out-json", default="assets/bench.json")
    b.add_argument("--out-md", default="assets/bench.md")
    b.set_defaults(handler=_bench)


def add_sweep(sub) -> None:
    """Entry point: the ``sweep`` command."""
    from bench.sweep import DEFAULT_SIGMAS

    w = sub.add_parser("sweep", help="static vs continuous throughput as output lengths spread (same mean)")
    w.add_argument("--num-requests", type=int, default=32, help="integer in [1, 10000]")
    w.add_argument("--mean-tokens", type=int, default=32, help="mean output length; integer in [1, 100000]")
    w.add_argument(
        "--sigmas",
        type=float,
        nargs="+",
        default=list(DEFAULT_SIGMAS),
        help="spread levels (log-normal shape, >= 0; 0 = all lengths equal)",
    )
    w.add_argument("--cap-factor", type=float, default=8.0, help="longest output <= cap-factor x mean; >= 1")
    w.add_argument("--max-num-seqs", type=int, default=4)
    w.add_argument("--max-num-batched-tokens", type=int, default=128)
    w.add_argument("--block-size", type=int, default=16)
    w.add_argument("--seed", type=int, default=0)
    w.add_argument("--rounds", type=int, default=1, help="runs per level and policy (the fastest counts); [1, 20]")
    w.add_argument("--model", default="SmolLM2-135M-Instruct")
    w.add_argument("--device", default=None, help="cpu or cuda (default: cuda if available)")
    w.add_argument("--out", default="assets/sweep.json")
    w.set_defaults(handler=_sweep)


def _check(name: str, value) -> None:
    lo, hi = BENCH_RANGES[name]
    for v in value if isinstance(value, list) else [value]:
        if v is not None and not lo <= v <= hi:
            raise ValueError(f"--{name.replace('_', '-')}={v} is out of range: an integer in [{lo}, {hi}]")


def _progress(desc: str):
    from tqdm import tqdm

    bar = tqdm(desc=desc, bar_format="{desc}: {elapsed} {postfix}", file=sys.stderr)
    return bar, (lambda msg: (bar.set_postfix_str(msg), bar.update(0)))


def _bench(args) -> int:
    from bench import report, rows, run
    from bench.measure import ParityError
    from engine.models import load_model
    from engine.workload import load_scenario, read_workload

    for name in (
        "num_requests",
        "max_tokens",
        "rounds",
        "step_tokens",
        "max_num_batched_tokens",
        "block_size",
        "max_num_seqs",
        "step_batches",
    ):
        _check(name, getattr(args, name))
    if args.workload:
        specs, budget = read_workload(args.workload), 128
    else:
        scenario = load_scenario(args.scenario)
        specs, budget = scenario["requests"], scenario.get("config", {}).get("max_num_batched_tokens", 128)
    loaded = load_model(args.model, args.device)
    work = rows.make_workload(loaded, specs, args.num_requests, args.max_tokens)
    opts = run.BenchOptions(
        max_num_seqs=args.max_num_seqs,
        rounds=args.rounds,
        max_num_batched_tokens=args.max_num_batched_tokens or budget,
        block_size=args.block_size,
        step_batches=args.step_batches,
        step_tokens=args.step_tokens,
        parity=args.parity,
        rows=args.rows,
    )
    bar, say = _progress("bench")
    try:
        result = run.run_bench(loaded, work, opts, progress=say)
    except ParityError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        bar.close()
    result["workload"]["source"] = args.workload or f"scenario {args.scenario}"
    report.write(result, args.out_json, args.out_md)
    print(report.to_markdown(result))
    print(f"wrote {args.out_json} and {args.out_md}", file=sys.stderr)
    if not result["parity"]["identical"]:
        print(f"warning: greedy outputs differ across rows ({result['parity']['error']})", file=sys.stderr)
    return 0


def _sweep(args) -> int:
    import json
    from pathlib import Path

    from bench import sweep
    from engine.models import load_model
    from engine.workload import load_scenario

    for name in (
        "num_requests",
        "mean_tokens",
        "max_num_seqs",
        "max_num_batched_tokens",
        "block_size",
        "seed",
        "rounds",
    ):
        _check(name, getattr(args, name))
    if any(s < 0 or s > 4 for s in args.sigmas):
        raise ValueError(f"--sigmas={args.sigmas} is out of range: numbers in [0, 4]")
    if not 1 <= args.cap_factor <= 1000:
        raise ValueError(f"--cap-factor={args.cap_factor} is out of range: a number in [1, 1000]")
    loaded = load_model(args.model, args.device)
    bar, say = _progress("sweep")
    try:
        result = sweep.run_sweep(
            loaded,
            load_scenario("sixteen")["requests"],
            n=args.num_requests,
            mean=args.mean_tokens,
            sigmas=args.sigmas,
            max_num_seqs=args.max_num_seqs,
            max_num_batched_tokens=args.max_num_batched_tokens,
            block_size=args.block_size,
            seed=args.seed,
            cap_factor=args.cap_factor,
            rounds=args.rounds,
            progress=say,
        )
    finally:
        bar.close()
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(sweep.to_markdown(result))
    print(f"wrote {args.out}", file=sys.stderr)
    return 0
