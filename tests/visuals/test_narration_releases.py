"""Requests that end in the same step and share blocks (a cached prompt prefix): the narration releases each block
once, by the last of them to end, so the per-request numbers add up to what goes back to the pool. The expected
numbers are counted here from the block tables (distinct blocks of the enders, minus those a running request still
holds), never from the narration code."""

from __future__ import annotations

import pytest
from conftest import RECORDED
from fakes import run_fake

from batchscope.engine.request import Request, SamplingParams
from batchscope.explain.narration import narrate
from batchscope.steplog import trace
from batchscope.steplog.view import TraceView

SHARED = list(range(500, 512))  # 12 tokens: 3 blocks of 4


def _enders(view: TraceView, k: int, tables: dict) -> tuple[str, str, set[int], set[int], set[int]]:
    """The two requests that end at step position ``k``, their blocks, and the blocks the others hold."""
    first, second = (f["request_id"] for f in view.steps[k]["finished"])
    held = {b for rid, t in tables.items() if rid not in (first, second) for b in t}
    return first, second, set(tables[first]), set(tables[second]), held


@pytest.mark.parametrize(
    ("policy", "k", "unit", "hand"),
    [("sglang", 65, "token slots", (74, 76, 31)), ("continuous", 64, "KV blocks", (11, 11, 3))],
)
def test_co_finishers_of_the_shipped_traces_release_their_shared_prefix_once(policy, k, unit, hand):
    """vllm-vs-sglang: A and B (the story's opening in common: 31 radix-cache tokens, 3 blocks of 8) hit max_tokens
    in the same step and nobody else runs: all the pool's used blocks are theirs, each counted once."""
    view = TraceView(trace.read(RECORDED / f"vllm-vs-sglang-{policy}.jsonl"))
    first, second, a, b, held = _enders(view, k, view.block_tables(k))
    assert not held and (len(a - b), len(b - a), len(a & b)) == hand
    assert len(a - b) + len(b - a) + len(a & b) == view.steps[k]["kv"]["num_used_blocks"]  # 181 / 25, 0 after
    text = narrate(view, k)
    assert f"{first} hit max_tokens and finished, releasing the {len(a - b)} {unit} it alone held." in text
    assert (
        f"{second} hit max_tokens and finished, releasing {len(b - a)} {unit} and the {len(a & b)} it shared with "
        f"{first}." in text
    )
    kv = view.steps[k]["kv"]
    assert f"{kv['num_used_blocks']}/{kv['num_blocks']} {unit} in use during the step, 0 after the release." in text


def _run(abort_step: int | None) -> TraceView:
    """A and B: the 12 shared tokens + 2 own, 3 outputs (or aborted before ``abort_step``); C: the first 8 shared
    tokens + 6 own, 10 outputs. Blocks of 4, prefix caching on: all three start at step 0, B and C find A's blocks
    in the cache, so A and B share 3 blocks and C shares 2 of them; A and B end together while C runs on."""

    def req(rid: str, prompt: list[int], m: int, abort: int | None) -> Request:
        return Request(rid, prompt, SamplingParams(max_tokens=m, ignore_eos=True), arrival_step=0, abort_step=abort)

    reqs = [
        req("A", [*SHARED, 600, 601], 3, abort_step),
        req("B", [*SHARED, 610, 611], 3, abort_step),
        req("C", [*SHARED[:8], *range(620, 626)], 10, None),
    ]
    config = dict(block_size=4, num_kv_blocks=16, max_num_seqs=3, max_num_batched_tokens=64)
    *_, records = run_fake(reqs, batching="continuous", enable_prefix_caching=True, **config)
    return TraceView(records)


def test_co_finishers_with_a_running_sharer_release_only_what_nobody_keeps():
    """Step 2: A and B hit max_tokens (10 + 2 tokens: 4 blocks each). Of their 5 distinct blocks C keeps the 2 of
    its 8-token prefix: 3 go back, A's own 4th, B's own 4th and the 3rd block A and B shared."""
    view = _run(None)
    k = 2
    first, second, a, b, held = _enders(view, k, view.block_tables(k))
    assert (first, second) == ("A", "B") and (len(a), len(b), len(a & b), len(a & b & held)) == (4, 4, 3, 2)
    released = len((a | b) - held)
    assert released == 3 and view.steps[k]["kv"]["num_used_blocks"] - released == len(held) == 4
    mine, theirs, shared = len(a - b - held), len(b - a - held), len((a & b) - held)
    assert mine + theirs + shared == released
    text = narrate(view, k)
    assert (
        f"A hit max_tokens and finished, releasing the {mine} KV block it alone held (2 more stay in use: other "
        f"requests share them). B hit max_tokens and finished, releasing {theirs} KV block and the {shared} it shared "
        "with A (2 more stay in use: other requests share them)." in text
    )
    assert "7/16 KV blocks in use during the step, 4 after the release." in text


def test_aborts_of_sharers_in_one_step_give_each_block_back_once():
    """The same run with A and B aborted before step 2 is scheduled (after 2 output tokens): their blocks are those
    of step 1's tables; C keeps 2, so 3 go back: 1 with A and 2 with B, which A's shared block goes back with."""
    view = _run(2)
    k = 2
    assert [(f["request_id"], f["aborted"]["num_freed_blocks"]) for f in view.steps[k]["finished"]] == [
        ("A", 4),
        ("B", 4),
    ]
    before = view.block_tables(k - 1)
    _, _, a, b, held = _enders(view, k, before)
    assert len((a | b) - held) == 3 and len(a - b - held) == 1 and len(b - a - held) + len((a & b) - held) == 2
    text = narrate(view, k)
    assert (
        "A was aborted at step 2 by the workload (its abort_step), before this step was scheduled, while running, "
        "after 2 output tokens; the 1 KV block it alone held went back to the pool (2 stay in use: other requests "
        "share them)." in text
    )
    assert (
        "B was aborted at step 2 by the workload (its abort_step), before this step was scheduled, while running, "
        "after 2 output tokens; 1 KV block and the 1 it shared with A went back to the pool (2 stay in use: other "
        "requests share them)." in text
    )


def test_a_lone_abort_beside_a_sharer_says_how_many_of_its_blocks_went_back():
    """Only A aborted before step 2: of its 4 blocks B and C still hold the 3 shared ones (C 2 of them), so 1 goes
    back."""

    def req(rid: str, prompt: list[int], m: int, abort: int | None) -> Request:
        return Request(rid, prompt, SamplingParams(max_tokens=m, ignore_eos=True), arrival_step=0, abort_step=abort)

    reqs = [req("A", [*SHARED, 600, 601], 3, 2), req("B", [*SHARED, 610, 611], 3, None)]
    *_, records = run_fake(reqs, batching="continuous", enable_prefix_caching=True, block_size=4, num_kv_blocks=16)
    view = TraceView(records)
    before = view.block_tables(1)
    assert len(set(before["A"]) - set(before["B"])) == 1 and len(before["A"]) == 4
    assert (
        "after 2 output tokens; 1 of its 4 KV blocks went back to the pool (3 stay in use: other requests share "
        "them)." in narrate(view, 2)
    )
