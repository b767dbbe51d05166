"""Live runs in the background (batchscope/app/live.py): a Cancel stops a run between steps and keeps its partial trace;
a second user's queued run starts as soon as the first ends or is cancelled; a queued run can be cancelled unstarted.
The engine's own stop (``should_stop``) is checked on the fake runner: the partial trace is valid and says so."""

from __future__ import annotations

import threading
import time

from fakes import EOS, FakeRunner, make_request

from batchscope.app.live import LiveRun
from batchscope.engine.config import EngineConfig
from batchscope.engine.engine import LLMEngine
from batchscope.steplog import trace


def fake_work(steps_done: list[int], step_s: float = 0.01, total: int = 10_000):
    """A run of ``total`` fake steps (``step_s`` each) that stops when asked, like the engine does."""

    def work(should_stop, report):
        for k in range(total):
            if should_stop():
                break
            time.sleep(step_s)
            steps_done.append(k)
            report(k / total, f"step {k}")
        return {"continuous": [k for k in steps_done]}

    return work


def wait(cond, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline
        time.sleep(0.005)


def test_cancel_stops_a_running_run_and_the_queued_one_starts_at_once():
    lock = threading.Lock()
    a_steps: list[int] = []
    b_steps: list[int] = []
    a = LiveRun(fake_work(a_steps), lock).start()
    wait(lambda: a.status == "running" and len(a_steps) >= 3)
    b = LiveRun(fake_work(b_steps, total=5), lock).start()
    time.sleep(0.2)
    assert b.status == "queued" and not b_steps  # the machine is busy with A
    a.cancel()
    t_cancel = time.monotonic()
    wait(lambda: b.status in ("running", "done"))
    assert time.monotonic() - t_cancel < 0.5  # B starts as soon as A stops
    a.join(5)
    b.join(5)
    assert a.status == "cancelled" and 3 <= len(a_steps) < 10_000 and a.result  # the partial result is kept
    assert b.status == "done" and len(b_steps) == 5


def test_a_queued_run_can_be_cancelled_before_it_starts():
    lock = threading.Lock()
    lock.acquire()
    steps: list[int] = []
    job = LiveRun(fake_work(steps), lock).start()
    time.sleep(0.1)
    job.cancel()
    job.join(2)
    assert job.status == "cancelled" and not steps and job.result == {}
    lock.release()


def test_an_error_releases_the_lock_and_is_reported():
    lock = threading.Lock()

    def broken(should_stop, report):
        raise RuntimeError("boom")

    job = LiveRun(broken, lock).start()
    job.join(2)
    assert job.status == "error" and "boom" in job.error and not lock.locked()


def test_engine_stops_between_steps_and_the_partial_trace_is_valid():
    calls = []

    def should_stop() -> bool:
        calls.append(1)
        return len(calls) > 3  # three steps run, then stop

    reqs = [make_request("A", 4, 50), make_request("B", 4, 50, arrival_step=100)]
    records = LLMEngine(FakeRunner(), EngineConfig(block_size=4, num_kv_blocks=32), eos_token_ids={EOS}).run(
        reqs, should_stop=should_stop
    )
    trace.validate_records(records)
    summary = {r["request_id"]: r for r in records[-1]["requests"]}
    assert len(records) - 2 == 3 and records[-1]["partial"] is True
    assert summary["A"]["finish_reason"] is None and summary["A"]["finish_time"] is None
    assert len(summary["A"]["output_token_ids"]) == 3 and summary["B"]["output_token_ids"] == []
    assert trace.loads(trace.dumps(records)) == records


def test_cancel_one_request_aborts_it_before_the_next_step_and_the_run_goes_on():
    """The Playground's "Cancel this request": while the run goes on in its thread, the page asks the job to cancel
    B after step 1 (``cancel_request``, from another thread); the engine aborts B before step 2 (running, 2 tokens,
    its 2 blocks freed: prompt 4 + 1 token of K/V in blocks of 4) and A runs to its 6 tokens."""
    config = EngineConfig(block_size=4, num_kv_blocks=32)
    engine = LLMEngine(FakeRunner(), config, eos_token_ids={EOS})
    step_done, asked = threading.Event(), threading.Event()

    def work(should_stop, report):
        job.attach(engine, ["A", "B"])

        def on_step(rec):
            job.mark_finished([f["request_id"] for f in rec["finished"]])
            if rec["step"] == 1:
                step_done.set()
                assert asked.wait(10)  # the page's click, on another thread, before step 2 is built

        reqs = [make_request("A", 4, 6, ignore_eos=True), make_request("B", 4, 8, ignore_eos=True)]
        return {"continuous": engine.run(reqs, on_step=on_step)}

    job = LiveRun(work, threading.Lock())
    job.start()
    assert step_done.wait(10), job.error
    job.cancel_request("B")
    job.cancel_request("nobody")  # not one of the run's requests: ignored
    asked.set()
    job.join(10)
    assert job.status == "done" and job.cancelled_requests == ["B"] and job.unfinished == []
    records = job.result["continuous"]
    trace.validate_records(records)
    step2 = records[3]
    assert [s["request_id"] for s in step2["scheduled"]] == ["A"]
    assert step2["finished"] == [
        {
            "request_id": "B",
            "reason": "abort",
            "aborted": {"state": "running", "num_output_tokens": 2, "num_freed_blocks": 2},
        }
    ]
    summary = {r["request_id"]: r for r in records[-1]["requests"]}
    assert len(summary["A"]["output_token_ids"]) == 6 and summary["A"]["finish_reason"] == "length"
    assert summary["B"]["finish_reason"] == "abort"
