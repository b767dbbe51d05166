"""Presenter mode fits the screen whole (issue 36, items 1 and 3), measured in Chromium on the exported player of
every shipped scenario's pair and run set (``batchscope.tools.static_site``'s pages: the pair of
``stories.default_pair``, and every run recorded for it, up to four; four-engines as its four engines), opened from
``file://`` at 960x540, 1280x720 and 1920x1080.

At sampled steps (the first and last, the tour's moments, and for each side the step with its longest headline and
the one with most callouts) every narration, callout, queue row, the key and the tour's moment is inside the window
(``getBoundingClientRect`` against the viewport) and not cut by its own box (``scrollHeight``/``scrollWidth``), and
the page does not scroll; a slot grid that names its slots names every one. The longest headlines are found from the
trace by ``batchscope.explain.headline``; what is drawn is read from the page, and each side's sentence is the
trace's headline, or its events alone (``headline(view, step, short=True)``, the why one key away) where the page
says it is brief (four runs at 960x540).

Block states (item 3): free, reserved and cached, as presenter mode paints them (the key's swatches, the same paint
as the maps), are apart in grey (L*) and washed out, on the light page and the dark one; the maps draw those colours;
the 128-block map of sixteen has its cached blocks in the key; the retraction at vllm-vs-sglang step 53 keeps its ⟲
and dark outline on SGLang's map in presenter mode. Screenshots go to artifacts/screenshots/present-fit-*.png.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest
from conftest import RECORDED, ROOT
from test_browser_presenter import _lab, _washed

from batchscope.explain.beats import story_beats
from batchscope.explain.headline import headline
from batchscope.explain.stories import default_pair
from batchscope.figures.kv import EVICTED_LINE
from batchscope.inputs.workload import list_scenarios
from batchscope.steplog import trace
from batchscope.steplog.view import TraceView
from batchscope.tools.html_export import player_page
from batchscope.tools.static_site import recorded_runs

pytestmark = pytest.mark.app

SHOTS = ROOT / "artifacts" / "screenshots"
SIZES = [(960, 540), (1280, 720), (1920, 1080)]
READY = "window.bsPlayer && bsPlayer.state.drawn >= 0 && bsPlayer.state.complete"
FOUR_ENGINES = ("continuous", "sglang", "tgi", "trtllm")


def run_sets() -> dict[str, tuple[str, ...]]:
    """Each shipped scenario's pair and, where more are recorded, its run set (four-engines: its four engines)."""
    out = {}
    for sc in list_scenarios():
        if not all((RECORDED / f"{sc}-{p}.jsonl").exists() for p in default_pair(sc)):
            continue
        out[f"{sc}"] = default_pair(sc)
        runs = FOUR_ENGINES if sc == "four-engines" else recorded_runs(sc)
        if len(runs) > 2:
            out[f"{sc}-all"] = runs
    return out


RUNS = run_sets()


def views(name: str) -> list[TraceView]:
    sc = name.removesuffix("-all")
    return [TraceView(trace.read(RECORDED / f"{sc}-{p}.jsonl")) for p in RUNS[name]]


def sample_steps(vs: list[TraceView]) -> list[int]:
    """Step 0 and the last, and per side its steps with the longest headline (long and short) and the one with most
    callouts."""
    last = max(v.num_steps for v in vs) - 1
    steps = {0, last}
    for v in vs:
        steps.add(max(range(v.num_steps), key=lambda k: len(headline(v, k))))
        steps.add(max(range(v.num_steps), key=lambda k: len(headline(v, k, short=True))))
        beats = story_beats(v)
        if beats:
            steps.add(max(beats, key=lambda k: len(beats[k])))
    return sorted(steps)


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("present-fit")
    out = {}
    for name, runs in RUNS.items():
        sc = name.removesuffix("-all")
        html, _, _ = player_page([str(RECORDED / f"{sc}-{p}.jsonl") for p in runs])
        out[name] = folder / f"{name}.html"
        out[name].write_text(html, encoding="utf-8")
    return out


# Every text the lecture needs, that is drawn: its box against the window and against its own content.
CUT = """() => {
  const W = innerWidth, H = innerHeight, out = [];
  const sel = '.bs-narration, .bs-beat, .bs-queue, .bs-key, .bs-moment, .bs-side-head, .bs-controls';
  for (const e of document.querySelectorAll(sel)) {
    if (!e.offsetParent || !e.textContent.trim()) continue;
    const r = e.getBoundingClientRect();
    const off = r.top < -0.5 || r.left < -0.5 || r.bottom > H + 0.5 || r.right > W + 0.5;
    const cut = e.scrollHeight > e.clientHeight + 1 || e.scrollWidth > e.clientWidth + 1;
    if (off || cut) out.push([e.className, e.textContent.slice(0, 60), Math.round(r.top), Math.round(r.bottom),
                              e.scrollHeight, e.clientHeight]);
  }
  const page = document.scrollingElement;
  if (page.scrollHeight > H + 1 || page.scrollWidth > W + 1) out.push(['page', '', page.scrollHeight, H]);
  return out; }"""


# Each side's slot grid: whether it draws its slots' names, how many it draws, and how many slots it has. Drawn, every
# slot is named (in rows under ~24 px plotly.js named every other one: "slot 1", "slot 3").
SLOT_TICKS = """bsPlayer.sides.map((s) => { const gd = s.dom.slots, y = gd._fullLayout.yaxis;
  return [y.showticklabels, gd.querySelectorAll('.ytick').length, (y.categoryarray || []).length]; })"""


def cases() -> list[tuple[str, tuple[int, int]]]:
    return [(name, size) for name in RUNS for size in SIZES]


@pytest.mark.parametrize("name,size", cases(), ids=lambda x: x if isinstance(x, str) else f"{x[0]}x{x[1]}")
def test_presenter_mode_shows_every_narration_callout_and_key_whole(browser, files, name, size):
    vs = views(name)
    steps = sample_steps(vs)
    page = browser.new_page(viewport={"width": size[0], "height": size[1]})
    page.set_default_timeout(60_000)
    page.goto(files[name].as_uri() + f"?present=1&step={steps[0]}")
    page.wait_for_function(READY)
    page.wait_for_function("document.fonts.status === 'loaded'")
    tour = page.evaluate("(bsPlayer.tour.tour || []).map((m) => m.step)")
    bad = []
    for k in sorted({*steps, *tour}):
        page.evaluate("(k) => bsPlayer.seek(k)", k)
        page.wait_for_function(f"bsPlayer.state.drawn === {k}")
        got = page.evaluate(CUT)
        if got:
            bad.append((k, got[:3]))
        ticks = page.evaluate(SLOT_TICKS)
        if any(shown and drawn != slots for shown, drawn, slots in ticks):
            bad.append((k, ["slot names", ticks]))
        headlines = page.evaluate("[...document.querySelectorAll('.bs-narration')].map((e) => e.textContent)")
        assert all(h.startswith(("Step", "Steps")) and len(h) < 260 for h in headlines), (k, headlines)
        brief = page.evaluate("document.body.classList.contains('brief')")
        assert headlines == [headline(v, min(k, v.num_steps - 1), short=brief) for v in vs], (k, brief, headlines)
    assert bad == [], (name, size, bad[:4])
    if name in ("vllm-vs-sglang", "sixteen", "four-engines-all"):
        SHOTS.mkdir(parents=True, exist_ok=True)
        k = {"vllm-vs-sglang": 53, "sixteen": 300, "four-engines-all": 53}[name]
        page.evaluate("(k) => bsPlayer.seek(k)", k)
        page.wait_for_function(f"bsPlayer.state.drawn === {k}")
        page.screenshot(path=str(SHOTS / f"present-fit-{name}-{k}-{size[0]}x{size[1]}.png"))
    page.close()


def test_the_long_narration_is_one_key_away(browser, files):
    """i: every side's whole narration (batchscope.explain.narration) and the callouts' text, where the headline
    was; i again: the headline."""
    from batchscope.explain.narration import narrate

    vs = views("vllm-vs-sglang")
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    page.set_default_timeout(60_000)
    page.goto(files["vllm-vs-sglang"].as_uri() + "?present=1&step=53")
    page.wait_for_function(READY)
    said = "[...document.querySelectorAll('.bs-narration')].map((e) => e.textContent)"
    assert page.evaluate(said) == [headline(v, 53) for v in vs]
    page.keyboard.press("i")
    page.wait_for_function(f"{said}[1].length > 300")
    assert page.evaluate(said) == [narrate(v, 53) for v in vs]
    callouts = page.evaluate("[...document.querySelectorAll('.bs-beat')].map((e) => e.textContent)")
    assert any("what the radix cache keeps" in t for t in callouts), callouts  # beats.BEAT_TEXT, not its name
    page.keyboard.press("i")
    page.wait_for_function(f"{said}[0] === {headline(vs[0], 53)!r}")
    page.close()


# The key's swatches as painted, with their labels.
SWATCHES = """() => [...document.querySelectorAll('#bs-key .bs-key-item')].filter((e) => e.querySelector('.bs-swatch'))
  .map((e) => [e.textContent.trim(), getComputedStyle(e.querySelector('.bs-swatch')).backgroundColor])"""

# Every colour the block maps draw.
MAP_COLORS = """() => [...new Set(bsPlayer.sides.flatMap((s) => s.dom.blocks.data[0].marker.color))]"""


def _hex(rgb: str) -> str:
    return "#" + "".join(f"{int(x):02X}" for x in rgb[rgb.index("(") + 1 : rgb.index(")")].split(",")[:3])


@pytest.mark.parametrize("theme", ["", "&theme=dark"])
def test_block_states_stay_apart_in_grey_and_washed_out(browser, files, theme):
    """free, reserved ("res", TGI's "A res") and cached as drawn in presenter mode: at least 10 L* apart (a grayscale
    print) and 12 ΔE apart washed out (a third of the way to white); each at least 5 L* and 40 ΔE from every request
    colour the maps draw (used blocks). Before: cached, free and reserved were 0.4-1.1 L* apart."""
    page = browser.new_page(viewport={"width": 1920, "height": 1080})
    page.set_default_timeout(60_000)
    page.goto(files["four-engines-all"].as_uri() + f"?present=1&step=40{theme}")  # cached (SGLang), res (TGI, TRT)
    page.wait_for_function(READY)
    states = {label.split(" ")[0]: _hex(c) for label, c in page.evaluate(SWATCHES)}
    assert set(states) == {"free", "cached", "res"}, states
    drawn = {c.upper() for c in page.evaluate(MAP_COLORS)}
    assert set(states.values()) <= drawn | {states["free"]}, (states, drawn)
    used = page.evaluate("bsPlayer.sides.flatMap((s) => s.v.colors)")
    for (a, x), (b, y) in itertools.combinations(states.items(), 2):
        assert abs(_lab(x)[0] - _lab(y)[0]) >= 10, (a, b, x, y)
        assert math.dist(_lab(_washed(x)), _lab(_washed(y))) >= 12, (a, b, x, y)
    for name, s in states.items():
        for c in used:
            assert abs(_lab(s)[0] - _lab(c)[0]) >= 5 and math.dist(_lab(s), _lab(c)) >= 40, (name, s, c)
    page.close()


def test_the_big_maps_say_cached_and_the_retraction_keeps_its_mark(browser, files):
    """sixteen's 128-block maps draw cached blocks and the key names them; vllm-vs-sglang at step 53 (SGLang retracts
    C, 49 token slots freed, read from the trace) keeps ⟲ and the dark outline on SGLang's map in presenter mode."""
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    page.set_default_timeout(60_000)
    page.goto(files["sixteen"].as_uri() + "?present=1&step=300")
    page.wait_for_function(READY)
    assert any(label.startswith("cached") for label, _ in page.evaluate(SWATCHES))
    page.close()
    sglang = views("vllm-vs-sglang")[1]
    st = sglang.steps[53]  # the raw record: the slots C freed, less those A and B take at once (page size 1)
    (retraction,) = st["decisions"]["preemptions"]
    freed = retraction["num_freed_tokens"] - sum(s["num_tokens"] for s in st["scheduled"])
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    page.set_default_timeout(60_000)
    page.goto(files["vllm-vs-sglang"].as_uri() + "?present=1&step=53")
    page.wait_for_function(READY)
    gd = "bsPlayer.sides[1].dom.blocks"
    assert page.evaluate(f"{gd}.data[0].marker.line.color.filter((c) => c === {EVICTED_LINE!r}).length") == freed
    assert page.evaluate(f"{gd}.data[1].text.filter((t) => t.includes('⟲')).length") > 0
    assert any(
        "retraction" in label
        for label in page.evaluate("[...document.querySelectorAll('#bs-key .bs-key-item')].map((e) => e.textContent)")
    )
    page.close()
