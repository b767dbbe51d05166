"""The command line as an engineer meets it: inputs never destroyed, work never lost, every value checked up front
(strict workload types, devices, model paths), help with defaults and examples, a version, shrinking a scenario, a
metrics command, results on stdout and progress on stderr (plain lines off a terminal), Ctrl-C keeps a partial
trace, and unseeded sampling draws a fresh, recorded seed."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest
from clikit import assert_clear_error, cli, run_workload
from conftest import CASES, RECORDED, ROOT

from batchscope.steplog import trace

# runs the command line or the tools in child processes: `make test`, not the fast tier
pytestmark = pytest.mark.cli


@pytest.mark.parametrize(
    "line,needles",
    [
        ({"prompt": "hi", "max_tokens": 3, "ignore_eos": "false"}, ("line 1", "'ignore_eos'", "true or false")),
        ({"prompt": "hi", "max_tokens": 3, "seed": False}, ("line 1", "'seed'", "integer")),
        ({"prompt": "hi", "max_tokens": True}, ("line 1", "'max_tokens'", "integer")),
        ({"prompt": "hi", "max_tokens": 3, "request_id": ""}, ("line 1", "'request_id'", "1-64")),
        ({"prompt": "hi", "max_tokens": 3, "request_id": 7}, ("line 1", "'request_id'", "string")),
        ({"prompt": "hi", "max_tokens": 3, "request_id": "a\nb"}, ("line 1", "'request_id'", "printable")),
        ({"prompt": "hi", "max_tokens": 3, "arrival_time": 1, "arrival_step": 2}, ("line 1", "not both")),
        ({"prompt": "hi", "max_tokens": 3, "arrival_step": 1.5}, ("line 1", "'arrival_step'")),
        ({"prompt": "hi", "max_tokens": 3, "temperature": 11}, ("line 1", "'temperature'", "[0, 10]")),
        ({"prompt": "hi", "max_tokens": 3, "top_p": 1.5}, ("line 1", "'top_p'", "[0, 1]")),
        ({"prompt": "hi", "max_tokens": 0}, ("line 1", "'max_tokens'", "[1, 2**31 - 1]")),
        ({"prompt_token_ids": [1, True], "max_tokens": 3}, ("line 1", "prompt_token_ids[1]")),
        ({"prompt": "", "max_tokens": 3}, ("line 1", "'prompt'", "non-empty")),
    ],
)
def test_workload_fields_are_strictly_typed_before_the_model_loads(tmp_path, line, needles):
    t = time.monotonic()
    code, _, err = run_workload(tmp_path, line)
    assert_clear_error(code, err, *needles)
    assert time.monotonic() - t < 20  # no model load (that alone takes longer on these machines)


def test_nan_and_duplicate_ids_in_a_workload_name_the_line(tmp_path):
    wl = tmp_path / "w.jsonl"
    wl.write_text(
        '{"prompt": "a", "max_tokens": 2, "request_id": "A"}\n{"prompt": "b", "max_tokens": 2, "request_id": "A"}\n'
    )
    code, _, err = cli("run", "--workload", str(wl), "--out", str(tmp_path / "t.jsonl"))
    assert_clear_error(code, err, "w.jsonl line 2", "'A'", "line 1", "unique")
    wl.write_text('{"prompt": "a", "max_tokens": 2, "temperature": NaN}\n')
    code, _, err = cli("run", "--workload", str(wl), "--out", str(tmp_path / "t.jsonl"))
    assert_clear_error(code, err, "w.jsonl line 1", "temperature", "NaN")


@pytest.mark.parametrize(
    "flags,needles",
    [
        (("--device", "gpu"), ("--device", "cpu, cuda, cuda:N or mps")),
        (("--device", "cuda:7"), ("--device", "cuda:7")),
        (("--model", "README.md"), ("README.md", "is a file")),
        (("--model", "./no/such/folder"), ("does not exist",)),
        (("--model", "docs"), ("without config.json",)),
        (("--num-requests", "0"), ("--num-requests", "[1, 4]")),
        (("--max-tokens", "0"), ("--max-tokens", "[1, 1000000]")),
        (("--seed", "-1"), ("--seed",)),
        (("--threads", "0"), ("--threads", "[1, 256]")),
    ],
)
def test_every_cli_value_is_checked_with_a_clear_message(tmp_path, flags, needles):
    code, _, err = cli("run", "--scenario", "seed-abcd", *flags, "--out", str(tmp_path / "t.jsonl"))
    assert_clear_error(code, err, *needles)


def test_outputs_are_checked_before_running_and_inputs_never_destroyed(tmp_path):
    wl = tmp_path / "w.jsonl"
    wl.write_text('{"prompt": "hi", "max_tokens": 2}\n')
    code, _, err = cli("run", "--workload", str(wl), "--out", str(wl), "--force")
    assert_clear_error(code, err, "also an input")
    assert wl.read_text() == '{"prompt": "hi", "max_tokens": 2}\n'
    code, _, err = cli("run", "--workload", str(tmp_path), "--out", str(tmp_path / "t.jsonl"))
    assert_clear_error(code, err, "is a folder")
    code, _, err = cli("run", "--scenario", "seed-abcd", "--out", str(tmp_path / "missing" / "t.jsonl"))
    assert_clear_error(code, err, "does not exist", "create it first")
    existing = tmp_path / "old.jsonl"
    existing.write_text("keep me")
    code, _, err = cli("run", "--scenario", "seed-abcd", "--out", str(existing))
    assert_clear_error(code, err, "already exists", "--force")
    assert existing.read_text() == "keep me"
    for args in (("bench", "--out-json", str(tmp_path / "no" / "b.json")), ("sweep", "--out", str(tmp_path))):
        code, _, err = cli(*args)
        assert_clear_error(code, err, "folder")


def test_help_shows_defaults_and_an_example_per_command_and_version():
    for command in ("run", "metrics", "scenarios", "bench", "sweep"):
        code, out, _ = cli(command, "--help")
        assert code == 0 and "example" in out and "python -m batchscope " + command in out, command
    _, out, _ = cli("run", "--help")
    assert "(default: continuous)" in out and "(default: SmolLM2-135M-Instruct)" in out
    assert "--batching {continuous,static,sglang,tgi,trtllm}" in out and "alias of --batching" in out
    code, out, _ = cli("--version")
    assert code == 0 and out.startswith("batchscope ")


def test_metrics_validates_and_prints_side_by_side():
    code, out, err = cli(
        "metrics", str(RECORDED / "seed-abcd-static.jsonl"), str(RECORDED / "seed-abcd-continuous.jsonl")
    )
    assert code == 0, err
    assert "valid trace" in out and "ttft_s" in out and "padding_slot_steps" in out
    row = next(line for line in out.splitlines() if line.startswith("num_steps"))
    assert row.split()[-2:] == ["22", "14"]
    assert "tpot_s" in out and "NaN" not in out and "nan" not in out.lower().replace("n/a", "")
    code, _, err = cli("metrics", str(CASES / "d09-nan.jsonl"))
    assert_clear_error(code, err, "line 2", "t_end", "NaN")


@pytest.mark.real_model
def test_shrunk_scenario_runs_writes_atomically_and_reports_on_stdout(tmp_path):
    out = tmp_path / "t.jsonl"
    code, stdout, stderr = cli(
        "run", "--scenario", "seed-abcd", "--num-requests", "2", "--max-tokens", "2", "--out", str(out)
    )
    assert code == 0, stderr
    records = trace.read(out)
    assert [r["request_id"] for r in records[0]["requests"]] == ["B", "C"]
    assert all(len(r["output_token_ids"]) == 2 for r in records[-1]["requests"])
    assert stdout.startswith(f"wrote {out}") and "wrote" not in stderr
    assert "\r" not in stderr and len(stderr.strip().splitlines()) <= 12  # plain progress lines off a terminal
    assert [p.name for p in tmp_path.iterdir()] == ["t.jsonl"]  # no temporary file left behind
    code, _, err = cli("run", "--scenario", "seed-abcd", "--num-requests", "1", "--out", str(out), "--force")
    assert code == 0, err


@pytest.mark.real_model
def test_dtype_flag_loads_the_model_in_that_type_and_the_header_says_so(tmp_path):
    """--dtype bfloat16 on CPU: the header records it (and no device name: a CPU has none), and the run completes.
    Its tokens may differ from float32's, so only their count is checked."""
    out = tmp_path / "t.jsonl"
    code, _, err = cli(
        "run",
        "--scenario",
        "seed-abcd",
        "--num-requests",
        "1",
        "--max-tokens",
        "2",
        "--device",
        "cpu",
        "--dtype",
        "bfloat16",
        "--out",
        str(out),
    )
    assert code == 0, err
    records = trace.read(out)
    assert (records[0]["device"], records[0]["dtype"]) == ("cpu", "bfloat16") and "device_name" not in records[0]
    assert len(records[-1]["requests"][0]["output_token_ids"]) == 2
    code, _, err = cli("run", "--scenario", "seed-abcd", "--dtype", "float64", "--out", str(tmp_path / "u.jsonl"))
    assert code == 2 and "argument --dtype" in err and "'float32', 'bfloat16', 'float16'" in err.splitlines()[-1]


@pytest.mark.real_model
def test_ctrl_c_stops_between_steps_and_keeps_a_partial_trace(tmp_path):
    out = tmp_path / "t.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "batchscope", "run", "--scenario", "sixteen", "--out", str(out)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    for line in proc.stderr:  # the first progress line means steps are running
        if "steps" in line:
            break
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and "PARTIAL" in stdout
    records = trace.read(out)
    assert records[-1]["partial"] is True and 1 <= len(records) - 2 < 531
    assert any(r["finish_reason"] is None for r in records[-1]["requests"])


def test_progress_off_a_terminal_prints_a_few_plain_lines(capsys):
    from batchscope.cli.progress import Progress

    bar = Progress("continuous", total=16, file=sys.stderr)
    for k in range(1, 401):
        bar.update(1, done=k * 16 // 400, note=f"step {k}")
    bar.close()
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert "\r" not in err and 10 <= len(lines) <= 16 and lines[-1].startswith("continuous: 400 steps")


def test_thread_rule_leaves_a_core_free(monkeypatch):
    from batchscope.engine import threads

    monkeypatch.delenv("BATCHSCOPE_THREADS", raising=False)
    monkeypatch.setattr(threads, "available_cores", lambda: 2)
    assert threads.default_threads() == 1
    monkeypatch.setattr(threads, "available_cores", lambda: 1)
    assert threads.default_threads() == 1
    monkeypatch.setattr(threads, "available_cores", lambda: 16)
    assert threads.default_threads() == 15
    monkeypatch.setenv("BATCHSCOPE_THREADS", "3")
    assert threads.default_threads() == 3
    monkeypatch.setenv("BATCHSCOPE_THREADS", "many")
    with pytest.raises(ValueError, match="BATCHSCOPE_THREADS"):
        threads.default_threads()


def test_unseeded_runs_draw_fresh_recorded_seeds_and_seed_replays():
    from fakes import FakeRunner, make_request

    from batchscope.engine.config import EngineConfig
    from batchscope.engine.engine import LLMEngine

    def run(seed=None):
        reqs = [make_request("U", 3, 2, temperature=0.8), make_request("G", 3, 2)]
        records = LLMEngine(FakeRunner(), EngineConfig(block_size=4, num_kv_blocks=8)).run(reqs, seed=seed)
        return records[0]["seed"], {r["request_id"]: r["seed"] for r in records[0]["requests"]}

    (s1, r1), (s2, r2) = run(), run()
    assert s1 != s2 and r1["U"] != r2["U"] and r1["G"] is None  # greedy requests need no seed
    assert run(s1) == (s1, r1)


def test_results_of_scenarios_go_to_stdout():
    code, out, err = cli("scenarios")
    assert code == 0 and "seed-abcd" in out and not err.strip()
