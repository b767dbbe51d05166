"""The block map's titles count the pool in its own unit: an SGLang trace's pool is token slots (page_size 1, one
token per "block"), a vLLM-style trace's is KV blocks; the numbers are the step's own record."""

from __future__ import annotations

import pytest
from conftest import recorded_path

from batchscope.figures.blockgroups import grouped_title
from batchscope.figures.kv import block_map_title, kv_usage
from batchscope.steplog import trace
from batchscope.steplog.view import TraceView


@pytest.mark.parametrize(
    ("scenario", "policy", "unit"),
    [("seed-abcd", "continuous", "KV blocks"), ("vllm-vs-sglang", "sglang", "token slots")],
)
def test_titles_name_the_pool_in_its_unit(scenario, policy, unit):
    records = trace.read(recorded_path(scenario, policy))
    view, kv = TraceView(records), records[3]["kv"]
    assert block_map_title(view, 2) == f"{policy}: {unit} at step 2: {kv['num_used_blocks']}/{kv['num_blocks']} used"
    assert grouped_title(view, 2).startswith(f"{policy}: {unit} at step 2: ")
    assert grouped_title(view, 2).endswith(f" {unit.removeprefix('KV ')})")
    assert kv_usage(view).layout.title.text == f"{policy}: {unit} used per request"


@pytest.mark.parametrize(("scenario", "policy"), [("seed-abcd", "continuous"), ("vllm-vs-sglang", "sglang")])
def test_the_pools_caption_is_in_its_unit(scenario, policy):
    from batchscope.figures.packing import Interner
    from batchscope.player.playback import view_payload
    from batchscope.steplog.reasons import pool_words

    records = trace.read(recorded_path(scenario, policy))
    c = records[0]["config"]
    want = (
        f"KV pool {c['num_kv_blocks']:,} token slots"
        if policy == "sglang"
        else f"KV pool {c['num_kv_blocks']} blocks × {c['block_size']} tokens"
    )
    assert pool_words(records[0]) == want
    view = TraceView(records)
    assert view_payload(view, view.num_steps, Interner())["caption"].endswith(want)


def test_the_legend_and_hovers_name_the_cell_in_its_unit():
    from batchscope.figures.kv import block_marks, legend_text

    sg = TraceView(trace.read(recorded_path("vllm-vs-sglang", "sglang")))
    vl = TraceView(trace.read(recorded_path("vllm-vs-sglang", "continuous")))
    assert legend_text(sg).startswith("Token slots: ") and "freed by a retraction" in legend_text(sg)
    assert legend_text(vl).startswith("KV blocks: ") and "freed by a preemption" in legend_text(vl)
    k = next(k for k, st in enumerate(sg.steps) if st["kv"]["num_used_blocks"])
    owned = [h for h in block_marks(sg, k)["hover"] if not h.endswith(": free")]
    assert owned and all(h.startswith("slot ") and "slots" not in h.split(":")[1][:12] for h in owned), owned[:3]
    assert all(h.startswith("block ") for h in block_marks(vl, k)["hover"])
    bs = vl.header["config"]["block_size"]
    assert any(f"/{bs} slots" in h for h in block_marks(vl, k)["hover"])
    held = {f"{rid}, " for rid in vl.block_tables(k)}  # "block 3: A, 5/16 slots": one comma after the owner
    assert all(",," not in h and h.endswith(("slots", ": free")) for h in block_marks(vl, k)["hover"][:4])
    assert any(h.split(": ", 1)[1].startswith(tuple(held)) for h in block_marks(vl, k)["hover"])
    assert all(not h.endswith(",") for h in block_marks(sg, k)["hover"])


def test_an_sglang_checklist_never_passes_a_step_that_retracted():
    """SGLang tries a prefill before the decode batch that retracts: a step with a retraction shows "no preemption
    this step" as the reason or not reached, never as a check the head passed."""
    from batchscope.explain.checklist import head_checklist

    view = TraceView(trace.read(recorded_path("vllm-vs-sglang", "sglang")))
    retracting = [k for k, st in enumerate(view.steps) if st["preempted"] and head_checklist(view, k)]
    assert retracting  # steps that retract while a head waits
    for k in retracting:
        for item in head_checklist(view, k):
            assert item["limit"] != "preempted_this_step" or item["state"] == "binds", (k, item)
