"""Compare logic for any two runs: the settings that differ, the same-workload check, the metrics strip."""

from __future__ import annotations

import copy

from conftest import RECORDED, step_records

from batchscope.compare.runs import config_diff, metrics_strip, same_workload
from batchscope.steplog import trace
from batchscope.steplog.metrics import summarize
from batchscope.steplog.view import TraceView

EVICTIONS = "evictions (preempt / retract / pause)"  # one row for each engine's word: a retraction is no preemption


def load(name: str) -> list[dict]:
    return trace.read(RECORDED / f"{name}.jsonl")


def variant(records: list[dict], **config) -> TraceView:
    out = copy.deepcopy(records)
    out[0]["config"].update(config)
    return TraceView(out)


def test_config_diff_names_the_policy_and_every_changed_field():
    s, c = TraceView(load("sixteen-static")), TraceView(load("sixteen-continuous"))
    assert config_diff(s, c) == ["batching: static → continuous"]
    assert config_diff(c, c) == []
    b = variant(c.records, max_num_batched_tokens=32, enable_chunked_prefill=False, scheduling_policy="priority")
    b.header["model"] = "tiny"
    assert config_diff(c, b) == [
        "model: SmolLM2-135M-Instruct → tiny",
        "enable_chunked_prefill: on → off",
        "max_num_batched_tokens: 128 → 32",
        "scheduling_policy: fcfs → priority",
    ]


def test_a_setting_recorded_only_when_on_reads_off_when_absent():
    """SGLang's mixed chunks and vLLM's speculative config appear in a header only when on: the other run's absent
    field is "off", not "not recorded"; a field a trace lacks otherwise stays "not recorded"."""
    c = TraceView(load("sixteen-continuous"))
    assert "enable_mixed_chunk" not in c.header["config"] and "speculative_config" not in c.header["config"]
    mixed = variant(c.records, enable_mixed_chunk=True)
    assert config_diff(mixed, c) == ["enable_mixed_chunk: on → off"]
    spec = variant(c.records, speculative_config={"method": "ngram", "num_speculative_tokens": 3})
    assert config_diff(c, spec) == ["speculative_config: off → {'method': 'ngram', 'num_speculative_tokens': 3}"]
    older = copy.deepcopy(c.records)
    del older[0]["config"]["block_size"]
    assert config_diff(TraceView(older), c) == ["block_size: not recorded → 16"]


def test_the_fields_recorded_only_when_on_are_the_engines():
    """The list visuals read (``batchscope.steplog.records.RECORDED_WHEN_ON``) is what the engine leaves out of a header
    with every option off."""
    from dataclasses import asdict

    from batchscope.engine.config import FAMILY_FIELDS, EngineConfig
    from batchscope.steplog.reasons import RECORDED_WHEN_ON

    header = EngineConfig().header_dict()
    family_knobs = {name for names in FAMILY_FIELDS.values() for name in names}  # recorded under their family only
    fields = set(asdict(EngineConfig())) - {
        "batching",
        "num_speculative_tokens",
        "prompt_lookup_min",
        "prompt_lookup_max",
        *family_knobs,
    } | {"speculative_config"}
    assert fields - set(header) == set(RECORDED_WHEN_ON)
    for family, names in FAMILY_FIELDS.items():
        assert set(names) <= set(EngineConfig(batching=family).header_dict())
    on = EngineConfig(batching="sglang", enable_mixed_chunk=True, num_speculative_tokens=2).header_dict()
    assert set(RECORDED_WHEN_ON) <= set(on)


def test_same_workload_accepts_two_policies_and_names_the_first_difference():
    s, c = TraceView(load("sixteen-static")), TraceView(load("sixteen-continuous"))
    ok, msg = same_workload(s, c)
    assert ok and "16 requests" in msg
    ok, msg = same_workload(TraceView(load("seed-abcd-continuous")), c)
    assert not ok and msg.startswith("different requests: only in A: B, C, A, D; only in B: S01")
    other = copy.deepcopy(c.records)
    other[0]["requests"][2]["max_tokens"] = 12
    assert same_workload(c, TraceView(other)) == (False, "request S03: max_tokens 400 in A, 12 in B")
    other = copy.deepcopy(c.records)
    other[0]["requests"][0], other[0]["requests"][1] = other[0]["requests"][1], other[0]["requests"][0]
    ok, msg = same_workload(c, TraceView(other))
    assert not ok and "position 1 is S01 in A, S02 in B" in msg
    seed = TraceView(load("seed-abcd-continuous"))
    late = copy.deepcopy(seed.records)
    late[0]["requests"][3]["arrival_step"] = 2
    assert same_workload(seed, TraceView(late)) == (
        False,
        "request D: arrives at arrival_step 0 in A, arrival_step 2 in B",
    )
    retimed = copy.deepcopy(seed.records)  # step-clock arrivals: the recorded wall-clock time may differ
    retimed[0]["requests"][0]["arrival_time"] = 0.5
    assert same_workload(seed, TraceView(retimed))[0]


def test_metrics_strip_reads_summarize_for_both_runs():
    s, c = TraceView(load("sixteen-static")), TraceView(load("sixteen-continuous"))
    rows = {r["metric"]: r for r in metrics_strip(s, c)}
    assert list(rows) == ["steps", "mean TTFT", "mean TPOT", "throughput", EVICTIONS, "padding slot-steps"]
    ss, sc = summarize(s.records), summarize(c.records)
    assert (rows["steps"]["a"], rows["steps"]["b"]) == (1222, 531) == (ss["num_steps"], sc["num_steps"])
    assert rows["steps"]["delta"] == 531 - 1222 and rows["steps"]["better"] == "b"
    padding = sum(len(st["padding_slots"]) for st in step_records(s.records))  # one padding row per slot-step
    assert padding > 0 and rows["padding slot-steps"]["a"] == padding and rows["padding slot-steps"]["b"] == 0
    assert rows["mean TTFT"]["a"] == ss["ttft_steps"]["mean"] and rows["mean TPOT"]["b"] == sc["tpot_steps"]["mean"]
    assert rows["throughput"]["better"] == "b"
    assert rows[EVICTIONS]["delta"] == 0 and rows[EVICTIONS]["better"] is None
    pre = {
        r["metric"]: r
        for r in metrics_strip(TraceView(load("preemption-static")), TraceView(load("preemption-continuous")))
    }
    assert pre[EVICTIONS]["b"] == 1 and pre[EVICTIONS]["better"] == "a"
