"""The block map's titles count the pool in its own unit: an SGLang trace's pool is token slots (page_size 1, one
token per "block"), a vLLM-style trace's is KV blocks; the numbers are the step's own record."""

from __future__ import annotations

import pytest
from conftest import recorded_path

from steplog import trace
from steplog.view import TraceView
from visuals.blockgroups import grouped_title
from visuals.kv import block_map_title, kv_usage


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
