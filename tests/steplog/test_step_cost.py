"""What a step costs (issue 20, part 6): each step's time against the tokens it computed, from the trace itself.
Checked against the raw lines of the shipped traces (times, decode-only steps, medians worked out here), a synthetic
run with known costs for the fit, and the Metrics page showing the chart with the measured sentence.
"""

from __future__ import annotations

import json
import statistics
from types import SimpleNamespace

import pytest
from appkit import page
from conftest import RECORDED, ROOT, recorded_pair

from batchscope.figures.step_cost import step_cost_figure, step_cost_sentence
from batchscope.steplog.step_cost import decode_by_batch, fit, step_costs


def raw_steps(name: str) -> list[dict]:
    return [r for r in map(json.loads, (RECORDED / f"{name}.jsonl").read_text().splitlines()) if r["type"] == "step"]


@pytest.mark.parametrize("name", ["sixteen-continuous", "sixteen-static", "seed-abcd-static"])
def test_the_costs_are_the_raw_step_times_and_the_medians_per_batch(name):
    raw = raw_steps(name)
    view = recorded_pair(name.split("-")[0] if name.startswith("sixteen") else "seed-abcd")[
        0 if name.endswith("static") else 1
    ]
    costs = step_costs(view)
    assert [c["seconds"] for c in costs] == [s["t_end"] - s["t_start"] for s in raw if s["scheduled"]]
    decodes: dict[int, list[float]] = {}
    slow = set(fit(costs)["outliers"])  # steps far off the line (its own test below) stand for no batch size
    for k, s in enumerate(raw):
        if s["scheduled"] and all(x["kind"] == "decode" for x in s["scheduled"]) and k not in slow:
            decodes.setdefault(len(s["scheduled"]), []).append(s["t_end"] - s["t_start"])
    got = decode_by_batch(costs)
    assert sorted(got) == sorted(decodes)
    for n, times in decodes.items():
        assert got[n]["steps"] == len(times)
        assert got[n]["median_s"] == statistics.median(times)
        assert got[n]["per_token_s"] == pytest.approx(statistics.median(times) / n)


def test_the_fit_recovers_a_known_fixed_cost_and_price_per_token():
    steps = [
        {
            "t_start": float(k),
            "t_end": k + 0.05 + 0.002 * n,
            "num_batched_tokens": n,
            "scheduled": [{"kind": "decode"}] * n,
        }
        for k, n in enumerate([1, 2, 3, 4, 10, 30, 64])
    ]
    line = fit(step_costs(SimpleNamespace(steps=steps)))
    assert line is not None and line.pop("outliers") == []
    assert line == pytest.approx({"fixed_s": 0.05, "per_token_s": 0.002})
    assert fit(step_costs(SimpleNamespace(steps=steps[:1]))) is None
    noisy = [*steps, {**steps[0], "t_end": steps[0]["t_start"] + 0.5}]  # a warm-up step 10x slower than its line
    for k, n in enumerate([5, 6, 7, 8, 9, 20]):  # more steps near the line, off it by +-1 ms
        noisy.append(
            {
                **steps[0],
                "t_end": 100.0 + k + 0.05 + 0.002 * n + (-1) ** k * 1e-3,
                "t_start": 100.0 + k,
                "num_batched_tokens": n,
                "scheduled": [{"kind": "decode"}] * n,
            }
        )
    line = fit(step_costs(SimpleNamespace(steps=noisy)))
    assert line is not None and line["outliers"] == [len(steps)]  # the warm-up step, nearly 10x its line
    assert line["fixed_s"] == pytest.approx(0.05, abs=1e-3) and line["per_token_s"] == pytest.approx(0.002, rel=0.05)


def test_the_chart_draws_the_floor_only_for_the_model_it_was_measured_on():
    """The floor is engine bench's: the model's weight bytes / the read bandwidth it measured
    (batchscope/assets/bench.json)."""
    bench = json.loads((ROOT / "batchscope" / "assets" / "bench.json").read_text())["decode_step"]
    static, cont = recorded_pair("seed-abcd")
    fig = step_cost_figure({"static": static, "continuous": cont})
    floor_ms = bench["weight_bytes"] / (bench["read_bandwidth_GBps"] * 1e9) * 1e3
    assert [s.y0 for s in fig.layout.shapes] == [pytest.approx(floor_ms)] and 20 < floor_ms < 30
    cont.header = {**cont.header, "model": "some-other-model"}
    assert not step_cost_figure({"continuous": cont}).layout.shapes


def test_the_sentence_gives_the_measured_medians():
    view = recorded_pair("sixteen")[1]
    raw = raw_steps("sixteen-continuous")
    one = [s["t_end"] - s["t_start"] for s in raw if len(s["scheduled"]) == 1 and s["scheduled"][0]["kind"] == "decode"]
    text = step_cost_sentence({"continuous": view})
    assert f"a decode step of 1 request took {statistics.median(one) * 1e3:.0f} ms (median of {len(one)})" in text


@pytest.mark.app
def test_the_metrics_page_shows_what_a_step_costs():
    at = page("page_metrics", scenario="seed-abcd")
    assert not at.exception
    assert any(h.value.startswith("What a step costs") for h in at.subheader)
    assert any("a decode step of" in m.value for m in at.markdown)
