"""Shared case e01 (../shared/cases/README.md): the prefix cache's eviction order.

A finished request gives its blocks back tail first: a block holding a cached prefix to the back of the free queue,
one without (a partial last block) to the front; allocation takes from the front. So a cached chain is evicted from
its tail, and a later prompt sharing the chain's head still finds it (hashes are chained: a lookup stops at the
first miss, so a tail kept behind an evicted head would be unreachable). In one slot and a 6-block pool, B (8
tokens), A (FOX[:12]), X (CAP, 13 tokens, shares nothing) and A2 (FOX + 2 tokens, 16) run one after another: X
evicts B's blocks and A's *tail*, so A2 still hits A's first two blocks. The case text's hand-computed steps are
checked from the step records (``kv.allocated``, ``evicted``, ``cached_free_blocks``, ``block_tables``,
``num_prefix_hit_tokens``), the free queue after each finish from the pool, and the hit rate 8/49 from
``batchscope.steplog.metrics`` and ``python -m batchscope metrics``. The schedule needs no model (a model-free runner
samples every token); the outputs (the references') are checked on SmolLM2. The rule in general:
tests/engine/test_prefix_cache_eviction_and_hits.py.
"""

from __future__ import annotations

import pytest
from clikit import metrics_cli
from conftest import CASES, case_workload, hf_greedy, step_records
from fakes import EOS, FakeRunner

from batchscope.engine.config import EngineConfig
from batchscope.engine.engine import LLMEngine
from batchscope.engine.llm import generate_trace
from batchscope.inputs.workload import read_workload, to_requests
from batchscope.steplog import trace
from batchscope.steplog.metrics import summarize

# the case's flags: --block-size 4 --max-num-batched-tokens 64 --max-num-seqs 1 --num-kv-blocks 6 (prefix caching
# and the full-prompt admission rule on, the defaults; ignore_eos is in the workload)
CONFIG = dict(max_num_seqs=1, num_kv_blocks=6, block_size=4, max_num_batched_tokens=64, enable_prefix_caching=True)


class QueueRunner(FakeRunner):
    """The model-free runner, plus the pool's free queue (front = reused first) right after each request finishes
    and frees its blocks (the engine calls ``release`` then)."""

    def __init__(self):
        super().__init__()
        self.pool = None
        self.queue_after: dict[str, list[int]] = {}

    def release(self, request_id):
        self.queue_after[request_id] = self.pool.free_queue()


def run() -> tuple[list[dict], dict[str, list[int]]]:
    runner = QueueRunner()
    engine = LLMEngine(runner, EngineConfig(**CONFIG), eos_token_ids={EOS})
    runner.pool = engine.scheduler.block_manager.pool
    records = engine.run(to_requests(read_workload(CASES / "e01.jsonl"), tokenizer=None))
    trace.validate_records(records)
    return records, runner.queue_after


def step_facts(st: dict) -> dict:
    kv = st["kv"]
    return {
        "scheduled": [(s["request_id"], s["kind"], s["num_tokens"], s["num_computed_tokens"]) for s in st["scheduled"]],
        "hit": st["num_prefix_hit_tokens"],
        "allocated": kv["allocated"],
        "tables": kv["block_tables"],
        "cached_free": kv["cached_free_blocks"],
        "evicted": kv["evicted"],
    }


# By hand, with vLLM's rules (the case text): free queue [0..5] at the start.
EXPECTED_STEPS = [
    # B takes [0, 1] and finishes: both blocks full and hashed, back tail first -> [2, 3, 4, 5, 1, 0]
    {
        "scheduled": [("B", "prefill", 8, 0)],
        "hit": {"B": 0},
        "allocated": {"B": [0, 1]},
        "tables": {"B": [0, 1]},
        "cached_free": [],
        "evicted": [],
    },
    # A takes [2, 3, 4] (B's cached 1, 0 stay free) and finishes -> [5, 1, 0, 4, 3, 2]
    {
        "scheduled": [("A", "prefill", 12, 0)],
        "hit": {"A": 0},
        "allocated": {"A": [2, 3, 4]},
        "tables": {"A": [2, 3, 4]},
        "cached_free": [1, 0],
        "evicted": [],
    },
    # X needs 4 blocks: the unhashed 5, B's 1 and 0 (older) tail first, then A's *tail* 4; A's head 3, 2 stay cached
    {
        "scheduled": [("X", "prefill", 13, 0)],
        "hit": {"X": 0},
        "allocated": {"X": [5, 1, 0, 4]},
        "tables": {"X": [5, 1, 0, 4]},
        "cached_free": [3, 2],
        "evicted": [1, 0, 4],
    },
    # A2: FOX[0:4] -> 2, FOX[4:8] -> 3, FOX[8:12] evicted: hit 8, computes 8 at 8, takes 4 (no hash) and 0 (X's)
    {
        "scheduled": [("A2", "prefill", 8, 8)],
        "hit": {"A2": 8},
        "allocated": {"A2": [4, 0]},
        "tables": {"A2": [2, 3, 4, 0]},
        "cached_free": [1, 5],
        "evicted": [0],
    },
]


def test_each_step_allocates_evicts_and_hits_as_computed_by_hand():
    records, _ = run()
    assert [step_facts(st) for st in step_records(records)] == EXPECTED_STEPS


def test_a_finished_request_gives_its_blocks_back_tail_first_hashed_to_the_back():
    """The free queue right after each finish (front = reused first). X's last block 4 (1 of 4 tokens, no hash)
    goes to the front, its full blocks 0, 1, 5 to the back; A2's four full blocks go back 0, 4, 3, 2."""
    _, queue_after = run()
    assert queue_after == {
        "B": [2, 3, 4, 5, 1, 0],
        "A": [5, 1, 0, 4, 3, 2],
        "X": [4, 3, 2, 0, 1, 5],
        "A2": [1, 5, 0, 4, 3, 2],
    }


def test_hit_rate_is_8_of_49_in_the_metrics_and_the_cli(capsys, tmp_path):
    """Queries are each admission's known tokens (8 + 12 + 13 + 16 = 49), hits A2's 8: 8/49 = 0.1633."""
    records, _ = run()
    s = summarize(records)
    assert (s["prefix_cache_queries"], s["prefix_cache_hits"]) == (49, 8)
    assert s["prefix_cache_hit_rate"] == pytest.approx(8 / 49)
    assert (s["preempted_prefix_cache_queries"], s["preempted_prefix_cache_hits"]) == (0, 0)
    path = tmp_path / "e01.jsonl"
    trace.write(records, path)
    _, rows = metrics_cli(capsys, path)
    assert rows["prefix_cache_queries"] == ("tokens", ["49"]) and rows["prefix_cache_hits"] == ("tokens", ["8"])
    assert rows["prefix_cache_hit_rate"] == ("fraction", ["0.1633"])


@pytest.mark.real_model
def test_on_the_model_the_schedule_is_the_same_and_the_outputs_are_the_references(smollm):
    """On SmolLM2 the steps are those above (they do not depend on token values: every output is 1 token, never
    fed back), and each request's token is what transformers ``generate`` gives its prompt alone: A2, which
    computes only positions 8-15 over A's cached K/V, included."""
    records = generate_trace(smollm, case_workload("e01"), EngineConfig(**CONFIG))
    trace.validate_records(records)
    assert [step_facts(st) for st in step_records(records)] == EXPECTED_STEPS
    outputs = {r["request_id"]: r["output_token_ids"] for r in records[-1]["requests"]}
    for spec in case_workload("e01"):
        assert outputs[spec["request_id"]] == hf_greedy(smollm.model, spec["prompt_token_ids"], 1), spec["request_id"]
