"""The CLI end to end: a trace for the seed story, and one clear line (exit 2, no traceback) for each bad input."""

from __future__ import annotations

import json

import pytest
from clikit import assert_clear_error, cli, run_warnings, run_workload
from conftest import CASES

# runs the command line or the tools in child processes: `make test`, not the fast tier
pytestmark = pytest.mark.cli


def test_scenarios_lists_both():
    code, out, _ = cli("scenarios")
    assert code == 0 and "seed-abcd" in out and "sixteen" in out


@pytest.mark.real_model
def test_run_seed_abcd_writes_a_valid_trace(tmp_path):
    from batchscope.steplog import trace

    out = tmp_path / "t.jsonl"
    code, _, err = cli("run", "--scenario", "seed-abcd", "--batching", "continuous", "--out", str(out))
    assert code == 0, err
    records = trace.read(out)
    assert records[0]["scenario"] == "seed-abcd" and records[0]["model"] == "SmolLM2-135M-Instruct"
    assert records[0]["policy"] == "continuous"  # the header keeps its name for the batching mode
    assert [r["request_id"] for r in records[-1]["requests"]] == ["B", "C", "A", "D"]


@pytest.mark.real_model
def test_c02_prompt_over_budget_with_chunking_off_is_rejected_before_any_step(tmp_path):
    out = tmp_path / "t.jsonl"
    code, _, err = cli(
        "run",
        "--workload",
        str(CASES / "c02.jsonl"),
        "--batching",
        "continuous",
        "--max-num-batched-tokens",
        "32",
        "--no-chunked-prefill",
        "--block-size",
        "4",
        "--num-kv-blocks",
        "32",
        "--max-num-seqs",
        "2",
        "--out",
        str(out),
        timeout=60,
    )
    assert_clear_error(code, err, "'A'", "37", "max_num_batched_tokens=32", "chunked prefill", ">= 37")
    assert not out.exists()


@pytest.mark.parametrize(
    "flag,value,field",
    [
        ("--num-kv-blocks", "0", "num_kv_blocks"),
        ("--max-num-batched-tokens", "0", "max_num_batched_tokens"),
        ("--block-size", "0", "block_size"),
        ("--max-num-seqs", "-1", "max_num_seqs"),
    ],
)
def test_out_of_range_knobs(tmp_path, flag, value, field):
    code, _, err = cli("run", "--scenario", "seed-abcd", flag, value, "--out", str(tmp_path / "t.jsonl"))
    assert_clear_error(code, err, field, "[")


@pytest.mark.parametrize(
    "line,needle",
    [
        ({"prompt": "hi"}, "max_tokens"),
        ({"max_tokens": 3}, "exactly one of"),
        ({"prompt": "hi", "max_tokens": 3, "temprature": 0.5}, "temprature"),
        ({"prompt": "hi", "max_tokens": "many"}, "max_tokens"),
        ({"prompt": "hi", "max_tokens": 3, "priority": 1.5}, "priority"),
        ({"prompt": "hi", "max_tokens": 3, "priority": 2**63}, "[-2**63, 2**63 - 1]"),
        ({"prompt": "hi", "max_tokens": 3, "priority": True}, "priority"),
    ],
)
def test_bad_workload_lines(tmp_path, line, needle):
    code, _, err = run_workload(tmp_path, line)
    assert_clear_error(code, err, "line 1", needle)


@pytest.mark.real_model
def test_request_too_big_for_the_pool_and_empty_prompt(tmp_path):
    code, _, err = run_workload(
        tmp_path, {"request_id": "big", "prompt": "hello " * 50, "max_tokens": 100}, "--num-kv-blocks", "4"
    )
    assert_clear_error(code, err, "'big'", "num_kv_blocks=4")
    code, _, err = run_workload(tmp_path, {"request_id": "e", "prompt": "", "max_tokens": 3})
    assert_clear_error(code, err, "line 1", "'prompt'", "non-empty")  # refused with the workload, before the model


def test_unknown_model_offline(tmp_path):
    code, _, err = cli(
        "run", "--scenario", "seed-abcd", "--model", "no-such-org/no-such-model", "--out", str(tmp_path / "t.jsonl")
    )
    assert_clear_error(code, err, "no-such-org/no-such-model", "offline")


def test_missing_workload_file(tmp_path):
    code, _, err = cli("run", "--workload", str(tmp_path / "nope.jsonl"), "--out", str(tmp_path / "t.jsonl"))
    assert_clear_error(code, err, "nope.jsonl", "does not exist")


@pytest.mark.real_model
def test_prompt_longer_than_the_models_context(tmp_path):
    code, _, err = run_workload(
        tmp_path, {"request_id": "huge", "prompt": "hello " * 9000, "max_tokens": 10}, "--num-kv-blocks", "4096"
    )
    assert_clear_error(code, err, "'huge'", "context of 8192 tokens")


def test_batching_flag_and_its_old_name(tmp_path):
    """``--batching`` picks the batching mode; ``--policy``, its old name, still does, so old command lines run."""
    from batchscope.cli.flags import config_from_args
    from batchscope.cli.main import _parser

    def batching(*flags: str) -> str:
        args = _parser().parse_args(["run", "--scenario", "seed-abcd", "--out", "t.jsonl", *flags])
        return config_from_args(args, {}).batching

    assert batching() == "continuous"
    assert batching("--batching", "static") == batching("--policy", "static") == "static"
    code, _, err = cli("run", "--scenario", "seed-abcd", "--batching", "fifo", "--out", str(tmp_path / "t"))
    assert code == 2 and "--batching" in err and "static" in err


def test_scheduling_policy_flag_is_checked(tmp_path):
    code, _, err = cli("run", "--scenario", "seed-abcd", "--scheduling-policy", "lottery", "--out", str(tmp_path / "t"))
    assert code == 2 and "--scheduling-policy" in err and "priority" in err


@pytest.mark.real_model
def test_priority_under_fcfs_runs_and_warns_once(tmp_path):
    wl = tmp_path / "w.jsonl"
    lines = [
        {"request_id": r, "prompt_token_ids": [504, 3575, 282], "max_tokens": 2, "priority": p}
        for r, p in (("a", 1), ("b", 2))
    ]
    wl.write_text("".join(json.dumps(x) + "\n" for x in lines))
    out = tmp_path / "t.jsonl"
    code, _, err = cli("run", "--workload", str(wl), "--num-kv-blocks", "8", "--out", str(out))
    assert code == 0, err
    warnings = run_warnings(err)
    assert len(warnings) == 1 and "priority is ignored" in warnings[0] and "fcfs" in warnings[0]
    code, _, err = cli(
        "run",
        "--workload",
        str(wl),
        "--scheduling-policy",
        "priority",
        "--no-prefix-caching",
        "--no-reserve-full-prompt",
        "--num-kv-blocks",
        "8",
        "--out",
        str(out),
        "--force",  # the first run's trace is replaced on purpose
    )
    assert code == 0 and run_warnings(err) == []
    from batchscope.steplog import trace

    header = trace.read(out)[0]
    assert header["config"]["scheduling_policy"] == "priority"
    assert (header["config"]["enable_prefix_caching"], header["config"]["reserve_full_prompt"]) == (False, False)
    assert [r["priority"] for r in header["requests"]] == [1, 2]
