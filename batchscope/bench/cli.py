"""The benchmark tools' commands, added to ``python -m batchscope`` through the ``batchscope.commands`` entry points:

    python -m batchscope bench [--num-requests 4 --max-tokens 32 --rounds 2 --max-num-seqs 4]
    python -m batchscope bench --contention          (decode step quiet vs one busy core, for 1 and 2 threads)
    python -m batchscope sweep [--num-requests 32 --mean-tokens 32 --sigmas 0 0.5 1 1.5 2]

A bad flag value raises ``ValueError`` (the CLI prints one line and exits 2); output paths are checked before
anything runs; greedy outputs that differ across rows exit 1 (not bad input: the engines disagree, which the
benchmark must not hide). Ctrl-C stops a run cleanly: what was measured is written, marked partial (exit 130).
"""

from __future__ import annotations

import sys

from batchscope.cli.common import HelpFormatter, add_device_flags, check_device, check_out_path
from batchscope.cli.progress import Progress
from batchscope.engine.config import LIMITS
from batchscope.engine.threads import use_threads

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
    from batchscope.bench.names import ROW_TITLES

    b = sub.add_parser(
        "bench",
        help="Batchscope vs transformers on one workload (tokens/s, decode step, parity)",
        formatter_class=HelpFormatter,
        epilog="example:\n  python -m batchscope bench --num-requests 6 --max-tokens 24 --max-num-seqs 4 "
        "--step-batches 1 4 --out-json /tmp/b.json --out-md /tmp/b.md\n  python -m batchscope bench --contention",
    )
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
    b.add_argument(
        "--contention",
        action="store_true",
        help="instead: the decode step quiet and with one busy core, for 1 and 2 threads "
        "(batchscope/assets/contention.*)",
    )
    add_device_flags(b)  # --model, --device, --dtype
    b.add_argument("--threads", type=int, default=None, help="CPU threads (default: available cores - 1, >= 1)")
    b.add_argument(
        "--out-json", default=None, help="default: batchscope/assets/bench.json (batchscope/assets/contention.json)"
    )
    b.add_argument(
        "--out-md", default=None, help="default: batchscope/assets/bench.md (batchscope/assets/contention.md)"
    )
    b.set_defaults(handler=_bench)


def add_sweep(sub) -> None:
    """Entry point: the ``sweep`` command."""
    from batchscope.bench.names import DEFAULT_SIGMAS

    w = sub.add_parser(
        "sweep",
        help="static vs continuous throughput as output lengths spread (same mean)",
        formatter_class=HelpFormatter,
        epilog="example:\n  batchscope sweep --num-requests 8 --mean-tokens 8 --sigmas 0 1 --out /tmp/sweep.json",
    )
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
    w.add_argument("--rounds", type=int, default=1, help="runs per level and batching mode (fastest counts); [1, 20]")
    add_device_flags(w)  # --model, --device, --dtype
    w.add_argument("--threads", type=int, default=None, help="CPU threads (default: available cores - 1, >= 1)")
    w.add_argument("--out", default="batchscope/assets/sweep.json", help="result JSON (its folder must exist)")
    w.set_defaults(handler=_sweep)


def _check(name: str, value) -> None:
    lo, hi = BENCH_RANGES[name]
    for v in value if isinstance(value, list) else [value]:
        if v is not None and not lo <= v <= hi:
            raise ValueError(f"--{name.replace('_', '-')}={v} is out of range: an integer in [{lo}, {hi}]")


def _bench(args) -> int:
    from batchscope.bench import report, run, workload
    from batchscope.bench.measure import ParityError

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
    stem = "contention" if args.contention else "bench"
    out_json = check_out_path(args.out_json or f"batchscope/assets/{stem}.json", "--out-json", (args.workload,))
    out_md = check_out_path(args.out_md or f"batchscope/assets/{stem}.md", "--out-md", (args.workload,))
    loaded, specs, budget = _load(args)
    work = workload.make_workload(loaded, specs, args.num_requests, args.max_tokens)
    if args.contention:
        return _contention(args, loaded, work, out_json, out_md)
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
    bar = Progress("bench")
    try:
        result = run.run_bench(loaded, work, opts, progress=bar.say)
    except ParityError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        bar.close()
    result["workload"]["source"] = args.workload or f"scenario {args.scenario}"
    report.write(result, out_json, out_md)
    print(report.to_markdown(result))
    print(f"wrote {out_json} and {out_md}", file=sys.stderr)
    if not result["parity"]["identical"]:
        print(f"warning: greedy outputs differ across rows ({result['parity']['error']})", file=sys.stderr)
    return _done(result)


def _load(args):
    """Check --device and --threads, read the workload, load the model: (loaded, specs, the scenario's budget)."""
    from batchscope.inputs.workload import load_scenario, read_workload
    from batchscope.model.models import check_model_name, load_model

    check_device(args.device)
    check_model_name(args.model)
    if args.workload:
        specs, budget = read_workload(args.workload), 128
    else:
        scenario = load_scenario(args.scenario)
        specs, budget = scenario["requests"], scenario.get("config", {}).get("max_num_batched_tokens", 128)
    use_threads(args.threads)
    loaded = load_model(args.model, args.device, args.dtype)
    from batchscope.engine.config import EngineConfig
    from batchscope.engine.llm import validate_requests
    from batchscope.inputs.workload import to_requests

    roomy = EngineConfig(
        num_kv_blocks=LIMITS["num_kv_blocks"][1], max_num_batched_tokens=LIMITS["max_num_batched_tokens"][1]
    )
    validate_requests(loaded, to_requests(specs, loaded.tokenizer), roomy)  # ids in the vocabulary, the context
    return loaded, specs, budget


def _contention(args, loaded, work, out_json, out_md) -> int:
    import json

    from batchscope.bench.contention import measure_contention, to_markdown
    from batchscope.steplog.trace import write_text_atomic

    bar = Progress("contention")
    try:
        result = measure_contention(
            loaded, work, batch=min(4, max(args.max_num_seqs)), rounds=args.rounds, progress=bar.say
        )
    finally:
        bar.close()
    write_text_atomic(json.dumps(result, indent=1, allow_nan=False) + "\n", out_json)
    write_text_atomic(to_markdown(result), out_md)
    print(to_markdown(result))
    print(f"wrote {out_json} and {out_md}", file=sys.stderr)
    return _done(result)


def _done(result: dict) -> int:
    """Exit status: 1 after an error, 130 when Ctrl-C stopped the run early (what was done is written, marked
    partial, either way), else 0."""
    if result.get("error"):
        print(f"error: {result['error']}; wrote what was measured before it, marked partial", file=sys.stderr)
        return 1
    if result.get("partial"):
        print("stopped by Ctrl-C: wrote what was measured, marked partial", file=sys.stderr)
        return 130
    return 0


def _sweep(args) -> int:
    import json

    from batchscope.bench import sweep
    from batchscope.inputs.workload import load_scenario
    from batchscope.model.models import check_model_name, load_model
    from batchscope.steplog.trace import write_text_atomic

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
    out = check_out_path(args.out, "--out")
    check_device(args.device)
    check_model_name(args.model)
    use_threads(args.threads)
    loaded = load_model(args.model, args.device, args.dtype)
    bar = Progress("sweep")
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
            progress=bar.say,
        )
    finally:
        bar.close()
    write_text_atomic(json.dumps(result, indent=1, allow_nan=False) + "\n", out)
    print(sweep.to_markdown(result))
    print(f"wrote {out}", file=sys.stderr)
    return _done(result)
