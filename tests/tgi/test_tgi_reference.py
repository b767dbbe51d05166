"""``TgiCore`` against every TGI reference schedule (tests/reference/tgi/, produced by TGI v3's own queue, block
allocator and radix allocator): every step's call, kind, scheduling record (budgets, sizes, queue, admitted requests
with their block ids, head and reason, allocator calls), scheduled work, stalls, finishes, waiting queue and pool,
and the per-request summary, exactly."""

from __future__ import annotations

import pytest
from tgi_replay import CASES, compare, load, replay


def test_all_fourteen_cases_are_here():
    assert len(CASES) == 14, CASES


@pytest.mark.parametrize("name", CASES)
def test_reference_case_step_by_step(name):
    case = load(name)
    steps, summary = replay(case.config, case.workload)
    problems = compare(case, steps, summary)
    shown = "\n".join(problems[:20])
    assert not problems, f"{len(problems)} differences from the TGI reference, first ones:\n{shown}"
