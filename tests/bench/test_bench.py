"""The benchmark's machinery on the tiny random Llama: all five rows agree, and a broken variant is caught.

Timings are recorded but never asserted (a test must not depend on the machine's speed).
"""

from __future__ import annotations

import pytest
import torch

from batchscope.bench import measure, report, rows, run, workload
from batchscope.model.models import LoadedModel

# runs the command line or the tools in child processes: `make test`, not the fast tier
pytestmark = pytest.mark.cli

OPTS = dict(max_num_seqs=[2], rounds=2, max_num_batched_tokens=16, block_size=4, step_batches=[1, 2], step_tokens=4)


@pytest.fixture
def tiny(tiny_model):
    return LoadedModel("tiny-llama", tiny_model, None, torch.device("cpu"), torch.float64)


@pytest.fixture
def work(tiny):
    # prompts of 2 to 8 tokens, so a static batch really pads; EOS (token 1) may end some answers early
    specs = [
        {
            "request_id": f"q{i}",
            "prompt_token_ids": [(7 * i + 3 * j) % 120 + 2 for j in range(2 + (3 * i) % 7)],
            "max_tokens": 6,
        }
        for i in range(5)
    ]
    return workload.make_workload(tiny, specs)


def test_check_parity_names_row_request_and_position():
    ref = {"a": [1, 2, 3], "b": [4]}
    measure.check_parity({"one": ref, "two": {"a": [1, 2, 3], "b": [4]}})
    with pytest.raises(measure.ParityError, match=r"'two' vs 'one', request 'a', first at output token 2 \(9 vs 3"):
        measure.check_parity({"one": ref, "two": {"a": [1, 2, 9], "b": [4]}})
    with pytest.raises(measure.ParityError, match=r"request 'b', first at output token 1 \(5 vs end"):
        measure.check_parity({"one": ref, "two": {"a": [1, 2, 3], "b": [4, 5]}})
    with pytest.raises(measure.ParityError, match="missing"):
        measure.check_parity({"one": ref, "two": {"a": [1, 2, 3]}})


def test_all_five_rows_agree_and_the_tables_are_written(tiny, work, tmp_path):
    result = run.run_bench(tiny, work, run.BenchOptions(**OPTS))
    assert [r["label"] for r in result["rows"]] == [
        "hf-sequential",
        "hf-static@2",
        "hf-continuous@2",
        "batchscope-static@2",
        "batchscope-continuous@2",
    ]
    assert result["parity"]["identical"] and result["parity"]["strict"]
    assert set(result["parity"]["agreement"].values()) == {1.0}
    tokens = {r["output_tokens"] for r in result["rows"]}
    assert len(tokens) == 1 and tokens.pop() > 5  # the same tokens everywhere, more than one per request
    assert result["rows"][0]["ratio_to_row_1"] == 1.0
    assert all(len(r["seconds"]) == 2 for r in result["rows"])
    assert [s["batch"] for s in result["decode_step"]["batches"]] == [1, 2]
    assert all(s["num_steps"] >= 1 for s in result["decode_step"]["batches"])
    assert result["decode_step"]["weight_bytes"] == sum(p.numel() * 8 for p in tiny.model.parameters()) + sum(
        b.numel() * b.element_size() for b in tiny.model.buffers()
    )
    share = result["rows"][-1]["outside_forward_share"]
    assert 0.0 <= share["total"] <= 1.0
    report.write(result, tmp_path / "b.json", tmp_path / "b.md")
    md = (tmp_path / "b.md").read_text()
    assert md.count("\n| ") >= 5 + 2 and "token-identical" in md


@torch.inference_mode()
def _static_right_padded_without_mask(loaded, work, max_num_seqs):
    """A classic fault: batch prompts padded on the right and no attention mask (the pads join the context)."""
    gen, out = rows._generation_config(loaded, work), {}
    for start in range(0, len(work.prompts), max_num_seqs):
        prompts = work.prompts[start : start + max_num_seqs]
        width = max(map(len, prompts))
        ids = torch.tensor([p + [0] * (width - len(p)) for p in prompts])
        y = loaded.model.generate(ids, generation_config=gen)
        for rid, row in zip(work.request_ids[start : start + max_num_seqs], y[:, width:].tolist()):
            out[rid] = rows._trim(row, rows._eos(loaded, work), work.max_tokens)
    return out


def test_a_broken_variant_fails_the_bench_loudly(tiny, work, monkeypatch):
    monkeypatch.setitem(rows.ROWS, "hf-static", _static_right_padded_without_mask)
    opts = run.BenchOptions(**{**OPTS, "rounds": 1, "step_batches": [1]})
    with pytest.raises(measure.ParityError, match="'hf-static@2' vs 'hf-sequential'"):
        run.run_bench(tiny, work, opts)
    # in report mode the same run finishes and says how much agreed
    result = run.run_bench(
        tiny, work, run.BenchOptions(**{**OPTS, "rounds": 1, "step_batches": [1], "parity": "report"})
    )
    assert not result["parity"]["identical"] and result["parity"]["agreement"]["hf-static@2"] < 1.0
    assert "NOT identical" in report.to_markdown(result)


def test_workload_checks(tiny):
    specs = [{"prompt_token_ids": [5, 6], "max_tokens": 3}, {"prompt_token_ids": [7], "max_tokens": 4}]
    with pytest.raises(ValueError, match="max_tokens differs"):
        workload.make_workload(tiny, specs)
    assert workload.make_workload(tiny, specs, max_tokens=2).max_tokens == 2
    with pytest.raises(ValueError, match="greedy"):
        workload.make_workload(tiny, [{"prompt_token_ids": [5], "max_tokens": 3, "temperature": 0.7}])


def test_targets_are_judged_from_the_measurements():
    rows = [
        {
            "label": "batchscope-continuous@4",
            "output_tokens_per_s": 30.0,
            "outside_forward_share": {"median": 0.03, "total": 0.04},
        },
        {"label": "batchscope-static@4", "output_tokens_per_s": 12.0},
        {"label": "hf-continuous@4", "output_tokens_per_s": 25.0},
    ]
    result = {"rows": rows, "decode_step": {"batches": [{"batch": 4, "ratio_to_floor": 1.8}]}}
    got = {t["key"]: (round(t["measured"], 3), t["met"]) for t in report.evaluate_targets(result)}
    assert got == {
        "cont_vs_hf_cb@4": (1.2, False),
        "cont_vs_static@4": (2.5, True),
        "step4_vs_floor": (1.8, False),
        "outside_share@4": (0.04, True),
    }


def test_cli_bad_input_is_one_clear_line(capsys):
    from batchscope.cli.main import main

    assert main(["bench", "--rounds", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: --rounds=0 is out of range: an integer in [1, 20]"]
    assert main(["bench", "--max-num-seqs", "4", "300"]) == 2
    assert "--max-num-seqs=300" in capsys.readouterr().err
