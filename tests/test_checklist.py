"""The head-of-queue checklist against the seed story and the preemption trace, computed by hand from the records."""

from __future__ import annotations

from pathlib import Path

from steplog import trace
from steplog.view import TraceView
from visuals.checklist import head_checklist

TRACES = Path(__file__).resolve().parents[1] / "assets" / "traces"


def _view(name: str) -> TraceView:
    return TraceView(trace.read(TRACES / f"{name}.jsonl"))


def test_d_waits_for_a_row_in_the_seed_story():
    view = _view("seed-abcd-continuous")
    items = head_checklist(view, 1)  # A, B, C run on all three rows; D waits
    binding = [i for i in items if i["binds"]]
    assert len(binding) == 1 and binding[0]["limit"] == "max_num_seqs"
    assert binding[0]["numbers"] == "3 / 3 rows used"
    assert not head_checklist(view, 3)  # D was admitted at step 3: nobody waits


def test_every_waiting_step_has_exactly_one_binding_limit_and_it_is_consistent_with_the_log():
    for path in sorted(TRACES.glob("*-continuous.jsonl")):
        view = TraceView(trace.read(path))
        cfg = view.header["config"]
        for k, st in enumerate(view.steps):
            items = head_checklist(view, k)
            assert bool(items) == bool(st["waiting"])
            if not items:
                continue
            binding = [i for i in items if i["binds"]]
            assert len(binding) == 1
            limit = binding[0]["limit"]
            if st["preempted"]:
                assert limit == "no preemption this step"
            elif len(st["running"]) >= cfg["max_num_seqs"]:
                assert limit == "max_num_seqs"
            elif st["num_batched_tokens"] >= cfg["max_num_batched_tokens"]:
                assert limit == "token budget"
            else:  # a row and budget were left, so only memory can have kept the head out
                assert limit.startswith("KV blocks")


def test_static_batch_binds_for_waiting_requests():
    view = _view("seed-abcd-static")
    k = next(k for k, st in enumerate(view.steps) if st["waiting"])
    assert [i["limit"] for i in head_checklist(view, k) if i["binds"]] == ["static batch"]
