"""``python -m batchscope frames --crop`` and ``--theme dark`` (issue 36, item 5): stills for a slide without the
control bar, and on the dark page.

The references are the exported player itself, opened here in the shared browser at the same size and step: where
its control bar and keys line sit (their boxes in the page) and the page's colours (its computed background). A
cropped still is the uncropped one with exactly those rows taken out (the views moved up by the bar's height, pixel
for pixel); a dark still's most common colour is the dark page's background, a light one's the light page's.
"""

from __future__ import annotations

from collections import Counter

import imageio.v3 as iio
import numpy as np
import pytest
from clikit import assert_clear_error, cli
from conftest import RECORDED

from batchscope.tools.html_export import player_page

pytestmark = pytest.mark.app

TRACE = [str(RECORDED / "seed-abcd-continuous.jsonl")]
STEP = 3


def still(tmp_path, name: str, *flags: str) -> np.ndarray:
    out = tmp_path / name
    code, _, err = cli("frames", *TRACE, "--steps", str(STEP), "--out", str(out), *flags, timeout=600)
    assert code == 0, err
    return iio.imread(out / f"step-{STEP:04d}.png")[..., :3].astype(int)


def reference(browser, tmp_path, query: str) -> dict:
    """The exported player at 1280x720 and ``STEP``: the rows of its control bar and keys line, and its page
    background, as the browser lays them out."""
    html, _, _ = player_page(TRACE)
    page_file = tmp_path / "p.html"
    page_file.write_text(html, encoding="utf-8")
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    page.set_default_timeout(60_000)
    page.goto(f"{page_file.as_uri()}?step={STEP}{query}")
    page.wait_for_function(f"window.bsPlayer && bsPlayer.state.drawn === {STEP} && bsPlayer.state.complete")
    got = page.evaluate(
        """() => { const box = (s) => document.querySelector(s).getBoundingClientRect();
          const c = box('.bs-controls'), k = box('.bs-keys'), mb = parseFloat(getComputedStyle(
            document.querySelector('.bs-keys')).marginBottom) || 0;
          return {top: c.top, bottom: k.bottom + mb, ground: getComputedStyle(document.body).backgroundColor}; }"""
    )
    page.close()
    return got


def rgb(css: str) -> tuple[int, ...]:
    """A computed CSS colour as (r, g, b); a transparent page shows the browser's white canvas."""
    parts = [float(x) for x in css[css.index("(") + 1 : css.index(")")].split(",")]
    return (255, 255, 255) if len(parts) == 4 and parts[3] == 0 else tuple(int(x) for x in parts[:3])


def commonest(image: np.ndarray) -> tuple[int, ...]:
    return Counter(map(tuple, image.reshape(-1, 3))).most_common(1)[0][0]


def test_crop_takes_the_control_bar_rows_out(browser, tmp_path):
    whole, cropped = still(tmp_path, "whole"), still(tmp_path, "cropped", "--crop")
    ref = reference(browser, tmp_path, "")
    top, shift = round(ref["top"]), round(ref["bottom"] - ref["top"])
    assert shift > 40  # the bar: a row of buttons, the step slider and the keys line
    assert np.abs(whole[:top] - cropped[:top]).max() <= 8  # the title above the bar: the same
    below = 720 - shift - top - 40  # the views, moved up by the bar's height (the last rows: what scrolled in)
    moved = np.abs(whole[top + shift : top + shift + below] - cropped[top : top + below]).max(axis=-1)
    assert (moved > 24).mean() < 0.002
    bar = np.abs(whole[top : top + shift] - cropped[top : top + shift]).max(axis=-1)
    assert (bar > 24).mean() > 0.05  # the bar's rows now show the views, not the buttons


def test_theme_dark_draws_the_dark_page(browser, tmp_path):
    light, dark = still(tmp_path, "light"), still(tmp_path, "dark", "--theme", "dark", "--crop")
    light_ground = rgb(reference(browser, tmp_path, "")["ground"])
    dark_ground = rgb(reference(browser, tmp_path, "&theme=dark")["ground"])
    assert sum(dark_ground) < 3 * 60 and sum(light_ground) > 3 * 200
    assert np.abs(np.array(commonest(dark)) - dark_ground).max() <= 4
    assert np.abs(np.array(commonest(light)) - light_ground).max() <= 4


def test_a_theme_not_known_gets_one_line(tmp_path):
    code, _, err = cli("frames", *TRACE, "--out", str(tmp_path / "o"), "--theme", "sepia")
    assert_clear_error(code, err, "--theme='sepia': must be one of light, dark")
