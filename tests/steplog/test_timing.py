"""Contention in step times (``batchscope.steplog.timing``): hand-built timings give the expected findings, the shipped
quiet traces pass, a stretched step is caught, and ``run --strict-timing`` refuses to write a contended trace."""

from __future__ import annotations

import copy
import json
import time

import pytest
import torch
from conftest import RECORDED, ROOT

from batchscope.steplog import trace
from batchscope.steplog.timing import SPIKE_RATIO, Spike, check_timing

# runs the command line or the tools in child processes: `make test`, not the fast tier
pytestmark = pytest.mark.cli

SHIPPED = sorted(RECORDED.glob("*.jsonl"))
# Recorded on a busy machine (2026-11-30); empty this once `make traces` has re-recorded them on a quiet one.
DECODE = (2, 2)  # (num_batched_tokens, rows): two requests decoding


def steps_trace(shaped: list[tuple[int, int, float]], cpu_share: float | None = None, device: str = "cpu") -> list:
    """Records [header, step..., summary] with steps of the given (num_batched_tokens, rows, seconds), back to back."""
    header: dict = {"type": "header", "device": device}
    if cpu_share is not None:
        header["cpu_share"] = cpu_share
    records, t = [header], 0.0
    for i, (tokens, rows, seconds) in enumerate(shaped):
        scheduled = [{"request_id": f"r{k}"} for k in range(rows)]
        step = {"type": "step", "step": i, "t_start": t, "t_end": t + seconds, "num_batched_tokens": tokens}
        records.append({**step, "scheduled": scheduled, "padding_slots": []})
        t += seconds
    return [*records, {"type": "summary"}]


def quiet(n: int = 60, seconds: float = 0.06) -> list[tuple[int, int, float]]:
    """A prefill, then decode steps within +-2% of each other, and a long prefill chunk (7x a decode) midway."""
    steps = [(16, 2, 0.3)] + [(*DECODE, seconds * (1 + 0.01 * ((7 * i) % 5 - 2))) for i in range(1, n)]
    steps[n // 2] = (64, 2, 7 * seconds)
    return steps


def test_a_quiet_run_has_no_findings():
    report = check_timing(steps_trace(quiet(), cpu_share=0.98))
    assert report.findings == () and not report.contended
    assert report.spikes == () and report.jumps == 0 and report.pairs > 40
    assert report.message.startswith("step times look quiet (median step 0.060 s over 60 steps")


def test_one_spike_is_found_with_its_step_and_reference():
    steps = quiet()
    steps[40] = (*DECODE, 1.0)
    report = check_timing(steps_trace(steps))
    assert report.spikes == (Spike(40, 1.0, pytest.approx(0.06, rel=0.03)),)
    assert len(report.findings) == 1 and "step 40, 1.000 s against 0.060 s" in report.message
    assert report.message.startswith("step times show CPU contention (median step 0.060 s")


def test_warm_up_steps_are_not_judged():
    steps = [(*DECODE, 0.06), *quiet()[1:]]
    steps[1] = (*DECODE, 1.0)  # warm-up: steps 0 and 1, though step 1 repeats step 0's shape
    steps[30:35] = [(99, 2, 1.0)] + [(99, 2, 0.07)] * 4  # the first step of a new shape
    report = check_timing(steps_trace(steps))
    assert report.findings == () and report.worst_ratio < 2
    steps[32] = (99, 2, 1.0)  # the same stall once the shape is known
    assert [s.step for s in check_timing(steps_trace(steps)).spikes] == [32]


def test_a_uniformly_slow_run_is_found_by_its_cpu_share_on_cpu_only():
    slow = steps_trace(quiet(seconds=0.5), cpu_share=0.2)
    report = check_timing(slow)
    assert report.spikes == () and report.jumps == 0  # even, just slow: the step times alone cannot tell
    assert report.findings == ("the run had 20% of its threads' CPU time (a quiet run: about 100%)",)
    assert check_timing(steps_trace(quiet(seconds=0.5), cpu_share=0.2, device="cuda:0")).findings == ()
    assert check_timing(steps_trace(quiet(seconds=0.5), cpu_share=0.9)).findings == ()


def test_erratic_steps_are_found_but_two_jumps_are_not():
    erratic = [(16, 2, 0.3)] + [(*DECODE, 0.06 if i % 4 else 0.2) for i in range(1, 60)]
    report = check_timing(steps_trace(erratic))
    assert report.spikes == () and report.jumps > 20
    assert len(report.findings) == 1 and "differ by over 1.5x" in report.findings[0]
    steps = quiet()
    steps[20] = (*DECODE, 0.2)  # one slow step: two jumps (in and out), and not 10x its neighbours
    assert check_timing(steps_trace(steps)).findings == ()


@pytest.mark.parametrize("run", ["continuous", "static"])
def test_the_busy_recordings_step_times_are_flagged(run):
    """The step times of the preemption traces as first shipped, recorded on a busy machine."""
    busy = json.loads((ROOT / "tests" / "data" / "busy-steps.json").read_text())[run]
    report = check_timing(steps_trace([tuple(s) for s in busy]))
    assert report.contended and report.jumps > 0.3 * report.pairs, report.message


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_shipped_traces_are_quiet(path):
    report = check_timing(trace.read(path))
    assert not report.contended, f"{path.name}: {report.message}"


def stretched(records: list, step: int, by: float) -> list:
    """A copy of ``records`` whose step ``step`` took ``by`` seconds longer (every later time moves with it)."""
    out = copy.deepcopy(records)
    end = out[1 + step]["t_end"]
    out[1 + step]["t_end"] += by
    for rec in out[2 + step : -1]:
        rec["t_start"] += by
        rec["t_end"] += by
    for req in out[-1]["requests"]:
        for key in ("arrival_time", "first_scheduled_time", "first_token_time", "finish_time"):
            if req[key] is not None and req[key] >= end:
                req[key] += by
    return out


@pytest.mark.parametrize("factor,flagged", [(SPIKE_RATIO + 2, True), (SPIKE_RATIO - 3, False)])
def test_a_shipped_trace_with_one_step_stretched(tmp_path, capsys, factor, flagged):
    from batchscope.cli.main import main

    records = trace.read(RECORDED / "sixteen-continuous.jsonl")
    seconds = records[1 + 300]["t_end"] - records[1 + 300]["t_start"]
    path = tmp_path / "stretched.jsonl"
    trace.write(stretched(records, 300, (factor - 1) * seconds), path)  # still a valid trace
    report = check_timing(trace.read(path))
    assert [s.step for s in report.spikes] == ([300] if flagged else [])
    assert main(["metrics", str(path)]) == 0
    timing = [line for line in capsys.readouterr().out.splitlines() if "timing:" in line]
    assert len(timing) == flagged and (not flagged or "worst: step 300" in timing[0])


@pytest.fixture
def tiny_cli(tiny_model, monkeypatch, tmp_path):
    """``python -m batchscope run`` in this process on the tiny random Llama, whose 20th step stalls for 1.5 s."""
    import batchscope.engine.threads
    import batchscope.model.models
    from batchscope.model.models import LoadedModel
    from batchscope.model.runner import ModelRunner

    loaded = LoadedModel("tiny-llama", tiny_model, None, torch.device("cpu"), torch.float64)
    monkeypatch.setattr(batchscope.model.models, "load_model", lambda name, device=None, dtype=None: loaded)
    monkeypatch.setattr(
        batchscope.engine.threads, "use_threads", lambda n=None: 1
    )  # leave this process's threads alone
    execute, calls = ModelRunner.execute, []

    def stalling(self, out, block_tables):
        calls.append(1)
        if len(calls) == 20:
            time.sleep(1.5)
        return execute(self, out, block_tables)

    monkeypatch.setattr(ModelRunner, "execute", stalling)
    workload = tmp_path / "w.jsonl"
    lines = [{"request_id": r, "prompt_token_ids": [5, 6, 7, 8], "max_tokens": 40, "ignore_eos": True} for r in "AB"]
    workload.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return ["run", "--workload", str(workload), "--batching", "continuous", "--num-kv-blocks", "64"]


def test_strict_timing_refuses_to_write_a_contended_trace(tiny_cli, tmp_path, capsys):
    from batchscope.cli.main import main

    out = tmp_path / "t.jsonl"
    assert main([*tiny_cli, "--strict-timing", "--out", str(out)]) == 3
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert not out.exists()
    assert len(err) == 1 and "CPU contention" in err[0] and "NOT written" in err[0] and "quiet machine" in err[0]


def test_without_strict_timing_a_contended_run_warns_once_and_writes(tiny_cli, tmp_path, capsys):
    from batchscope.cli.main import main

    out = tmp_path / "t.jsonl"
    assert main([*tiny_cli, "--out", str(out)]) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if "CPU contention" in line]
    assert len(warnings) == 1 and warnings[0].startswith("warning: step times show CPU contention")
    records = trace.read(out)
    assert records[0]["cpu_share"] >= 0 and check_timing(records).contended
