"""The benchmark tools never lose finished work: Ctrl-C mid-run keeps the rounds, rows and levels done so far,
marked partial, and the report says so; outputs are checked before anything runs. The contention measurement runs
on the tiny model (its figures are recorded, never asserted: timings depend on the machine)."""

from __future__ import annotations

import json

import pytest
import torch
from test_bench import OPTS

from batchscope.bench import contention, report, rows, run, sweep, workload
from batchscope.model.models import LoadedModel

# runs the command line or the tools in child processes: `make test`, not the fast tier
pytestmark = pytest.mark.cli


@pytest.fixture
def tiny(tiny_model):
    return LoadedModel("tiny-llama", tiny_model, None, torch.device("cpu"), torch.float64)


@pytest.fixture
def work(tiny):
    specs = [{"request_id": f"q{i}", "prompt_token_ids": [3 + i, 9, 11], "max_tokens": 4} for i in range(4)]
    return workload.make_workload(tiny, specs)


def interrupt_on(monkeypatch, row: str, after_calls: int):
    """Make ``row`` raise KeyboardInterrupt on its call number ``after_calls`` (1-based), as Ctrl-C would."""
    calls = []
    real = rows.ROWS[row]

    def fake(*args, **kw):
        calls.append(1)
        if len(calls) == after_calls:
            raise KeyboardInterrupt
        return real(*args, **kw)

    monkeypatch.setitem(rows.ROWS, row, fake)


def test_ctrl_c_during_the_rounds_keeps_what_ran_and_says_partial(tiny, work, monkeypatch, tmp_path):
    interrupt_on(monkeypatch, "batchscope-static", after_calls=3)  # warm-up, round 1, then Ctrl-C in round 2
    result = run.run_bench(tiny, work, run.BenchOptions(**OPTS))
    assert result["partial"] is True and result["decode_step"] == {"batches": []}
    done = {r["label"]: len(r["seconds"]) for r in result["rows"]}
    assert done["hf-sequential"] == 1 and done["batchscope-continuous@2"] >= 1  # round 2 runs E..A: E came first
    assert result["parity"]["identical"] and not result["parity"]["strict"]
    report.write(result, tmp_path / "b.json", tmp_path / "b.md")
    assert "PARTIAL" in (tmp_path / "b.md").read_text()
    assert json.loads((tmp_path / "b.json").read_text())["partial"] is True


def test_ctrl_c_during_the_sweep_keeps_the_finished_levels(tiny, monkeypatch):
    real, calls = sweep._one_run, []

    def fake(*args):
        calls.append(1)
        if len(calls) == 3:  # level 0 (both policies) is done; Ctrl-C in level 1
            raise KeyboardInterrupt
        return real(*args)

    monkeypatch.setattr(sweep, "_one_run", fake)
    prompts = [{"prompt_token_ids": [5 + i, 9, 11 + i]} for i in range(4)]
    result = sweep.run_sweep(tiny, prompts, n=4, mean=3, sigmas=(0.0, 1.0), max_num_seqs=2, block_size=4)
    assert result["partial"] is True and [lv["sigma"] for lv in result["levels"]] == [0.0]
    assert "PARTIAL" in sweep.to_markdown(result)


def test_contention_measures_each_thread_count_quiet_and_busy(tiny, work):
    before = torch.get_num_threads()
    result = contention.measure_contention(tiny, work, threads=(1, 2), batch=2, num_tokens=4, rounds=1)
    assert torch.get_num_threads() == before  # restored
    assert [r["threads"] for r in result["rows"]] == [1, 2]
    for r in result["rows"]:
        assert len(r["quiet_ms_per_round"]) == len(r["busy_ms_per_round"]) == 1
        assert (
            r["quiet_ms"] > 0 and r["busy_ms"] > 0 and r["slowdown"] == pytest.approx(r["busy_ms"] / r["quiet_ms"] - 1)
        )
    assert result["chosen_threads"] >= 1 and "| 1 |" in contention.to_markdown(result)
    json.dumps(result, allow_nan=False)


def test_an_error_in_a_row_keeps_what_ran_and_names_the_error(tiny, work, monkeypatch, capsys):
    from batchscope.bench.cli import _done

    real, calls = rows.ROWS["hf-continuous"], []

    def broken(*args, **kw):  # the warm-up passes; round 1 fails
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("out of memory")
        return real(*args, **kw)

    monkeypatch.setitem(rows.ROWS, "hf-continuous", broken)
    result = run.run_bench(tiny, work, run.BenchOptions(**{**OPTS, "rounds": 1}))
    assert result["partial"] and "out of memory" in result["error"]
    assert [r["label"] for r in result["rows"]] == ["hf-sequential", "hf-static@2"]  # the rows before it
    assert _done(result) == 1 and "out of memory" in capsys.readouterr().err
