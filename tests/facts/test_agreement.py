"""Every number a view prints equals the one counted here from the raw step lines, at every step of the clock (idle
steps included), for every shipped trace and for random runs of each batching mode (issue 32, item 3): the
narration's step number and pool line, the queue lists and each request's state, the steps table's row, and the
block map's ⟲ marks against what the evictions gave back."""

from __future__ import annotations

import json
import re
import warnings

import pytest
from conftest import RECORDED_TRACES, examples, parts
from fakes import FakeRunner
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from batchscope.engine.config import ConfigError, EngineConfig
from batchscope.engine.engine import LLMEngine
from batchscope.engine.request import Request, SamplingParams
from batchscope.engine.validation import RequestError
from batchscope.explain.narration import narrate
from batchscope.explain.stepinfo import queues, request_status
from batchscope.figures.kv import block_marks
from batchscope.figures.steps_table import step_row
from batchscope.steplog import trace
from batchscope.steplog.view import TraceView

POOL_LINE = re.compile(r"(\d+)/(\d+) (KV block|token slot)s in use during the step")


def expected(header: dict, steps: list[dict]) -> list[dict | None]:
    """Per clock number: what the views must show, from the raw lines (``None``: an idle step the engine skipped)."""
    by_number = {s["step"]: s for s in steps}
    seen: dict[str, int] = {}
    for s in steps:
        for r in [x["request_id"] for x in s["scheduled"]] + s["waiting"] + s["running"] + s["preempted"]:
            seen.setdefault(r, s["step"])
        for f in s["finished"]:
            seen.setdefault(f["request_id"], s["step"])
    ended: dict[str, tuple[int, str]] = {}
    out: list[dict | None] = []
    ids = [r["request_id"] for r in header["requests"]] + [r["request_id"] for s in steps for r in s.get("arrived", [])]
    for n in range(steps[-1]["step"] + 1):
        s = by_number.get(n)
        for f in s["finished"] if s else []:
            ended[f["request_id"]] = (n, "aborted" if f["reason"] == "abort" else "finished")
        state = {r: "not arrived" for r in ids if seen.get(r, n + 1) > n}
        if s:
            state |= {r: "waiting" for r in s["waiting"]} | {r: "running" for r in s["running"]}
            word = {"sglang": "retracted", "trtllm": "paused"}.get(header["policy"], "preempted")  # each engine's verb
            state |= {r: word for r in s["preempted"]}
        state |= {r: word for r, (_, word) in ended.items()}
        out.append({"record": s, "state": {r: state.get(r, "") for r in ids}, "ended": dict(ended)})
    return out


def tables(view_steps_raw: list[dict], n: int) -> dict[str, list[int]]:
    return view_steps_raw[n]["record"]["kv"]["block_tables"] if view_steps_raw[n]["record"] else {}


def given_back(header: dict, want: list[dict], n: int) -> int:
    """Blocks the evictions of step n gave back, from the raw tables: the victim's blocks of step n - 1 that nobody
    holds in step n, or that a request holds in step n and did not in n - 1 (taken at once); SGLang's retraction
    frees ``num_freed_tokens`` (its radix tree keeps the rest)."""
    s = want[n]["record"]
    if header["policy"] == "sglang":
        return sum(p.get("num_freed_tokens", 0) for p in s.get("decisions", {}).get("preemptions", []))
    before, now = tables(want, n - 1), s["kv"]["block_tables"]
    count = 0
    for victim in s["preempted"]:
        for b in before.get(victim, []):
            holders = [r for r, t in now.items() if b in t]
            if not holders or any(b not in before.get(r, []) for r in holders):
                count += 1
    return count


def assert_views_agree(records: list[dict], view: TraceView) -> None:
    header, steps, _ = parts(records)
    want = expected(header, steps)
    assert view.num_steps == len(want)
    for n, w in enumerate(want):
        text, s = narrate(view, n), w["record"]
        assert text.startswith(f"Step {n}:"), (n, text[:30])
        assert request_status(view, n) == w["state"], n
        q = queues(view, n)
        finished = [r for r, (k, word) in w["ended"].items() if word == "finished"]
        aborted = [r for r, (k, word) in w["ended"].items() if word == "aborted"]
        assert (sorted(q["finished"]), sorted(q["aborted"])) == (sorted(finished), sorted(aborted)), n
        if s is None:
            assert text.startswith(f"Step {n}: idle.") and not (q["waiting"] or q["running"]), n
            continue
        assert (q["waiting"], q["running"], q["preempted"]) == (s["waiting"], s["running"], s["preempted"]), n
        used, total, _ = POOL_LINE.search(text).groups()
        assert (int(used), int(total)) == (s["kv"]["num_used_blocks"], s["kv"]["num_blocks"]), n
        row = step_row(view, n)
        assert (row["step"], row["waiting"], row["batched tokens"]) == (n, len(s["waiting"]), s["num_batched_tokens"])
        if s["preempted"] and "block_tables" in s["kv"]:
            marks = sum(t.count("⟲") for t in block_marks(view, n)["text"])
            assert marks == given_back(header, want, n), n


@pytest.mark.parametrize("path", RECORDED_TRACES, ids=[p.stem for p in RECORDED_TRACES])
def test_every_view_agrees_with_the_raw_lines_on_every_shipped_trace(path):
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert_views_agree(records, TraceView(trace.read(path)))


@st.composite
def runs(draw):
    """Small random runs of each batching mode (static, continuous, SGLang's, speculative decoding): shared prefixes,
    late arrivals (idle steps), aborts, tiny pools (evictions)."""
    mode = draw(st.sampled_from(("static", "continuous", "sglang", "speculative")))
    batching = "continuous" if mode == "speculative" else mode
    block_size = 1 if batching == "sglang" else draw(st.integers(1, 4))
    common = draw(st.lists(st.integers(10, 11), max_size=6))
    requests, need = [], 1
    for i in range(draw(st.integers(1, 5))):
        prompt = common + draw(st.lists(st.integers(10, 11), min_size=1, max_size=8))
        arrival = draw(st.integers(0, 3) | st.integers(8, 14))
        abort = draw(st.none() | st.integers(arrival, arrival + 6))
        params = SamplingParams(max_tokens=draw(st.integers(1, 10)), ignore_eos=True)
        need = max(need, -(-(len(prompt) + params.max_tokens) // block_size))
        requests.append(Request(f"r{i}", prompt, params, arrival_step=arrival, abort_step=abort))
    config = dict(
        batching=batching,
        max_num_seqs=draw(st.integers(1, 4)),
        max_num_batched_tokens=draw(st.integers(16, 32)),
        block_size=block_size,
        num_kv_blocks=need + draw(st.integers(0, 8)),
        enable_prefix_caching=draw(st.booleans()),
    )
    if mode == "speculative":  # n-gram drafts from the prompts' repeats; the fake model rejects them
        config |= dict(num_speculative_tokens=draw(st.integers(1, 3)), prompt_lookup_min=1, prompt_lookup_max=2)
    return requests, config


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs())
def test_every_view_agrees_with_the_raw_lines_on_random_runs_of_every_mode(run):
    requests, config = run
    try:
        engine = LLMEngine(FakeRunner(), EngineConfig(**config), eos_token_ids={2})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            records = engine.run(requests)
    except (ConfigError, RequestError):
        assume(False)
        return
    assert_views_agree(records, TraceView(json.loads(json.dumps(records))))
