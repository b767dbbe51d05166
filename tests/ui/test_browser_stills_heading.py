"""The player's "↓ stills" image names its step (issue 36, item 5): a heading band over the charts with the page's
title and the step as the control bar says it ("step 27 / 80"), each side's label, on the page's background (the
dark one with ?theme=dark). Read from the PNG the button downloads and from the text the page drew on its canvas.
"""

from __future__ import annotations

import imageio.v3 as iio
import numpy as np
import pytest
from conftest import RECORDED

from batchscope.player.export import player_html
from batchscope.steplog import trace
from batchscope.steplog.view import TraceView

pytestmark = pytest.mark.app

READY = "window.bsPlayer && bsPlayer.state.drawn >= 0 && bsPlayer.state.complete"
PAIR = ("preemption-static", "preemption-continuous")
# the canvas's text calls, recorded as the page makes them
SPY = """() => { window.drawnText = []; const f = CanvasRenderingContext2D.prototype.fillText;
  CanvasRenderingContext2D.prototype.fillText = function (t, ...rest) { window.drawnText.push(String(t));
    return f.call(this, t, ...rest); }; }"""


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    out = tmp_path_factory.mktemp("stills") / "preemption.html"
    views = [TraceView(trace.read(RECORDED / f"{name}.jsonl")) for name in PAIR]
    out.write_text(player_html(views, "preemption"), encoding="utf-8")
    return out, max(v.num_steps for v in views)


def download(browser, path, query: str, tmp_path):
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    page.set_default_timeout(60_000)
    page.goto(path.as_uri() + query)
    page.wait_for_function(READY)
    page.evaluate(SPY)
    with page.expect_download() as got:
        page.click("#bs-stills")
    name = got.value.suggested_filename
    got.value.save_as(tmp_path / name)
    labels = page.evaluate("bsPlayer.sides.map((s) => s.v.label)")
    drawn = page.evaluate("window.drawnText")
    page.close()
    return name, iio.imread(tmp_path / name)[..., :3].astype(int), drawn, labels


def test_the_stills_image_has_a_heading_with_the_step(browser, exported, tmp_path):
    path, num_steps = exported
    name, image, drawn, labels = download(browser, path, "?step=27", tmp_path)
    assert name == "preemption-step-27.png"
    assert drawn[0] == f"preemption · step 27 / {num_steps - 1}"
    assert drawn[1:] == [x[0].upper() + x[1:] for x in labels]  # each side's label, as its heading capitalises it
    band = image[:40]
    assert (np.abs(band - 255).max(axis=-1) > 100).mean() > 0.01  # dark text on the white band
    assert np.abs(image[0, 0] - 255).max() <= 2


def test_the_stills_image_of_the_dark_page_is_dark(browser, exported, tmp_path):
    path, _ = exported
    _, image, _, _ = download(browser, path, "?step=27&theme=dark", tmp_path)
    assert image[:8, :8].max() < 60 and np.median(image[:40]) < 60  # the dark page's ground under the heading
