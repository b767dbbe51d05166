"""App smoke tests with Streamlit's AppTest over the recorded traces (no browser, no model)."""

from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest

pytestmark = pytest.mark.app


def open_app():
    at = AppTest.from_file("../app.py", default_timeout=60)
    at.run()
    assert not at.exception, at.exception
    return at


def charts(at):
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def test_opens_on_recorded_traces_with_all_charts():
    at = open_app()
    specs = charts(at)
    assert len(specs) == 8  # 4 figures x 2 policies
    titles = [s["layout"]["title"]["text"] for s in specs]
    assert sum("slot occupancy" in t for t in titles) == 2 and sum("block map" in t for t in titles) == 2
    assert any("Recorded" in i.value for i in at.info)


def test_step_slider_drives_both_sides():
    at = open_app()
    at.slider[0].set_value(5).run()
    assert not at.exception
    titles = [s["layout"]["title"]["text"] for s in charts(at) if "block map" in s["layout"]["title"]["text"]]
    assert len(titles) == 2 and all("at step 5 " in t for t in titles)


def test_switching_scenario_to_sixteen():
    at = open_app()
    at.selectbox[0].select("sixteen").run()
    assert not at.exception
    assert int([m.value for m in at.metric if m.label == "steps"][0]) > 500  # static on sixteen is long


@pytest.mark.real_model
def test_live_run_of_seed_abcd_replaces_the_recorded_traces():
    at = open_app()
    at.button[0].click().run(timeout=300)
    assert not at.exception, at.exception
    assert any("Live run" in i.value for i in at.info)
    assert [m.value for m in at.metric if m.label == "steps"] == ["22", "14"]  # same schedule as recorded
