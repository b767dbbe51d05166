"""The variance sweep: its length generator keeps the mean and raises the spread; a tiny run shows the effect."""

from __future__ import annotations

import itertools
import statistics

import pytest
import torch

from batchscope.bench import sweep
from batchscope.inputs.workload import output_lengths
from batchscope.model.models import LoadedModel

# runs the command line or the tools in child processes: `make test`, not the fast tier
pytestmark = pytest.mark.cli


@pytest.mark.parametrize("seed", [0, 1, 2, 7])
@pytest.mark.parametrize("n,mean", [(16, 32), (12, 20), (40, 8)])
def test_lengths_keep_the_mean_and_raise_the_spread(n, mean, seed):
    levels = [output_lengths(n, mean, s, seed) for s in sweep.DEFAULT_SIGMAS]
    assert all(len(lv) == n and sum(lv) == n * mean for lv in levels)  # the same total work at every level
    assert levels[0] == [mean] * n  # no spread: all equal
    stds = [statistics.pstdev(lv) for lv in levels]
    assert all(a < b for a, b in itertools.pairwise(stds)), stds
    assert all(1 <= x <= 8 * mean for lv in levels for x in lv)
    assert max(levels[-1]) >= 3 * mean  # very uneven: a few long answers ...
    assert sorted(levels[-1])[n // 2] < mean  # ... and a short majority (median below the mean)


def test_lengths_are_seeded_and_respect_the_cap():
    assert output_lengths(16, 32, 1.0, seed=3) == output_lengths(16, 32, 1.0, seed=3)
    assert output_lengths(16, 32, 1.0, seed=3) != output_lengths(16, 32, 1.0, seed=4)
    capped = output_lengths(16, 32, 3.0, seed=0, cap_factor=2.0)
    assert max(capped) <= 64 and sum(capped) == 16 * 32
    with pytest.raises(ValueError, match="sigma"):
        output_lengths(16, 32, -0.5)


def test_workloads_ignore_eos_and_use_the_drawn_lengths():
    prompts = [{"request_id": "x", "prompt": "Hello", "max_tokens": 400}, {"prompt_token_ids": [3, 4], "max_tokens": 1}]
    levels = sweep.sweep_workloads(prompts, n=5, mean=6, sigmas=(0.0, 1.0), seed=0)
    assert [s for s, _ in levels] == [0.0, 1.0]
    specs = levels[1][1]
    assert [s["max_tokens"] for s in specs] == output_lengths(5, 6, 1.0, 0)
    assert all(s["ignore_eos"] and s["temperature"] == 0.0 for s in specs)
    assert specs[0]["prompt"] == "Hello" and specs[1]["prompt_token_ids"] == [3, 4] and "messages" not in specs[0]


def test_tiny_sweep_ratio_is_one_without_spread_and_rises_with_it(tiny_model):
    loaded = LoadedModel("tiny-llama", tiny_model, None, torch.device("cpu"), torch.float64)
    prompts = [{"prompt_token_ids": [5 + i, 9, 11 + i]} for i in range(4)]
    result = sweep.run_sweep(
        loaded,
        prompts,
        n=8,
        mean=6,
        sigmas=(0.0, 1.5),
        max_num_seqs=4,
        max_num_batched_tokens=32,
        block_size=4,
        seed=0,
        rounds=2,
    )
    flat, spread = result["levels"]
    assert len(flat["static_seconds_per_round"]) == len(spread["continuous_seconds_per_round"]) == 2
    assert flat["static"]["seconds"] == min(flat["static_seconds_per_round"])
    for lv in (flat, spread):  # EOS ignored: every request produced exactly its drawn length
        assert lv["static"]["output_tokens"] == lv["continuous"]["output_tokens"] == 8 * 6
    # equal lengths: two full batches either way, so the same number of steps (6 each)
    assert flat["static"]["num_steps"] == flat["continuous"]["num_steps"] == 12
    assert flat["ratio_steps"] == 1.0 and flat["static"]["padding_slot_steps"] == 0
    # lengths [1, 1, 1, 7 | 1, 3, 5, 29]: static runs batch 1 for 7 steps and batch 2 for 29 (36 steps); continuous
    # refills slots as they free: r4-r6 join in step 1, r7 in step 2 and ends in step 30 (31 steps)
    assert spread["lengths"] == [1, 1, 1, 7, 1, 3, 5, 29]
    assert (spread["static"]["num_steps"], spread["continuous"]["num_steps"]) == (36, 31)
    assert spread["ratio_steps"] == pytest.approx(36 / 31)
    assert spread["static"]["padding_slot_steps"] == (3 * 6) + (1 * 28 + 1 * 26 + 1 * 24)
    assert result["anyscale"]["continuous_batching_alone_max_ratio"] == 8.0
    assert result["provenance"]["model"] == "tiny-llama" and result["config"]["sigmas"] == [0.0, 1.5]
    assert "| 1.5 |" in sweep.to_markdown(result)

    from batchscope.figures.metrics import sweep_ratio, sweep_throughput

    fig = sweep_ratio(result)
    assert list(fig.data[0].x) == [0.0, pytest.approx(spread["spread"]["cv"])]
    assert list(fig.data[1].y) == [1.0, pytest.approx(36 / 31)]  # the step-clock ratio
    assert fig.layout.yaxis.type == "log"
    notes = " ".join(a.text for a in fig.layout.annotations)
    assert "8x" in notes and "23x" in notes  # the published numbers, for context
    bars = sweep_throughput(result, clock="steps")
    assert [t.name for t in bars.data] == ["static", "continuous"]
    assert list(bars.data[0].y) == pytest.approx([48 / 12, 48 / 36])
