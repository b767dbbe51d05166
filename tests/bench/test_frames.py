"""``python -m batchscope frames`` (issue 20, part 2): stills, SVG charts, a GIF and an MP4 of chosen steps. Each still
is compared with the exported player's own screenshot at the same step and size, taken here in the shared browser;
the GIF's and the MP4's frames with the stills; the SVG charts hold the step's block labels. Bad arguments get one
line and exit 2 before a browser starts.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import imageio.v2 as iio2
import imageio.v3 as iio
import numpy as np
import pytest
from clikit import assert_clear_error, cli
from conftest import RECORDED

from batchscope.tools.html_export import player_page

pytestmark = pytest.mark.app

PAIR = [str(RECORDED / f"seed-abcd-{p}.jsonl") for p in ("static", "continuous")]


@pytest.fixture(scope="module")
def stills(tmp_path_factory):
    out = tmp_path_factory.mktemp("frames")
    code, _, err = cli(
        "frames",
        *PAIR,
        "--steps",
        "2-3,9",
        "--out",
        str(out),
        "--present",
        "--svg",
        "--gif",
        "--mp4",
        "--fps",
        "4",
        timeout=600,
    )
    assert code == 0, err
    assert "wrote 3 stills" in err
    return out


def differing(a: np.ndarray, b: np.ndarray, tol: int = 24) -> float:
    """The share of pixels whose channels differ by more than ``tol`` (of 255)."""
    return float((np.abs(a.astype(int) - b.astype(int)).max(axis=-1) > tol).mean())


def test_each_still_is_the_players_own_screenshot_at_that_step(browser, stills, tmp_path):
    html, _, _ = player_page(PAIR)
    page_file = tmp_path / "p.html"
    page_file.write_text(html, encoding="utf-8")
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    page.set_default_timeout(60_000)
    for k in (2, 3, 9):
        page.goto(f"{page_file.as_uri()}?step={k}&present=1")
        page.wait_for_function(f"window.bsPlayer && bsPlayer.state.drawn === {k} && document.fonts.status === 'loaded'")
        own = iio.imread(page.screenshot())[..., :3]
        still = iio.imread(stills / f"step-{k:04d}.png")[..., :3]
        assert still.shape == own.shape == (720, 1280, 3)
        assert differing(still, own) < 0.002, k
    page.close()
    assert differing(iio.imread(stills / "step-0002.png"), iio.imread(stills / "step-0003.png")) > 0.01


def test_the_gif_and_the_mp4_are_the_stills_in_order(stills):
    pngs = [iio.imread(stills / f"step-{k:04d}.png")[..., :3] for k in (2, 3, 9)]
    gif = iio.imread(stills / "frames.gif", index=None)
    assert gif.shape[0] == 3
    for frame, png in zip(gif, pngs):
        assert differing(frame[..., :3], png, tol=48) < 0.02
    assert iio.immeta(stills / "frames.gif", index=0)["duration"] == 250
    reader = iio2.get_reader(stills / "frames.mp4", format="FFMPEG")
    frames = [f for f in reader]
    assert reader.get_meta_data()["fps"] == 4 and len(frames) == 3
    for frame, png in zip(frames, pngs):
        assert frame.shape == png.shape and differing(frame, png, tol=64) < 0.05


def test_the_svg_charts_are_vector_and_hold_the_steps_labels(stills):
    names = sorted(p.name for p in stills.glob("step-0003-*.svg"))
    assert names == [f"step-0003-{s}-{c}.svg" for s in "ab" for c in ("blocks", "budget", "slots")]
    root = ET.parse(stills / "step-0003-b-blocks.svg").getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    texts = " ".join("".join(e.itertext()) for e in root.iter() if e.tag.endswith("text"))
    assert "D" in texts and "31" in texts  # continuous step 3: D holds a block; the pool has blocks 0..31


@pytest.mark.parametrize(
    "flags,needle",
    [
        (["--steps", "5-2"], "--steps='5-2': '5-2' is out of range: steps in [0, 21]"),
        (["--steps", "0-99"], "'0-99' is out of range: steps in [0, 21]"),
        (["--steps", "a"], "'a' is not a step K, a range A-B or A- (to the end)"),
        (["--size", "10x10"], "--size='10x10': WIDTHxHEIGHT with width in [320, 3840]"),
        (["--size", "1280"], "--size='1280'"),
        (["--fps", "0"], "--fps=0.0 is out of range: a number in [0.2, 30]"),
    ],
)
def test_bad_arguments_get_one_line(tmp_path, flags, needle):
    code, _, err = cli("frames", *PAIR, "--out", str(tmp_path / "o"), *flags)
    assert_clear_error(code, err, needle)
    assert not list((tmp_path).glob("o/step-*"))


def test_stills_already_there_are_kept_without_force(tmp_path):
    (tmp_path / "step-0000.png").write_bytes(b"mine")
    code, _, err = cli("frames", *PAIR, "--out", str(tmp_path), "--steps", "0")
    assert_clear_error(code, err, "already holds stills; add --force")
    assert (tmp_path / "step-0000.png").read_bytes() == b"mine"
