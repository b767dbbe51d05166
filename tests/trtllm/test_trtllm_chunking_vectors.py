"""Every context-chunking test vector of NVIDIA's ``ContextChunkingTest`` (tests/reference/trtllm), each under
EQUAL_PROGRESS and FIRST_COME_FIRST_SERVED: the positions after every iteration and the drafts left at the end."""

from __future__ import annotations

import pytest
from trtllm_vectors import load, run_chunking

DATA = load("context_chunking.json")
CASES = [
    pytest.param(t, policy, id=f"{t['test'].split('.')[1]}-{policy}")
    for t in DATA["tests"]
    for policy in t["positions_after_iteration"]
]


@pytest.mark.parametrize(("test", "policy"), CASES)
def test_chunking_vector(test, policy):
    positions, drafts = run_chunking(test, policy)
    assert positions == test["positions_after_iteration"][policy]
    if "final_draft_lengths" in test:
        assert drafts == test["final_draft_lengths"][policy]


def test_every_chunking_vector_is_run():
    assert len(DATA["tests"]) == 21 and len(CASES) == 42
