"""Presenter mode read from the back row (issue 20, parts 1 and 7), measured in a real browser (Debian's Chromium
through Playwright) on the exported file of shipped trace pairs, opened from file:// at 1280x720.

At several steps (the preemption of preemption-continuous and its recompute among them): the narration's computed
font size is 24 px or more and every other text on the page 18 px or more, SVG text of the plotly charts (cell
names, block ids and owners, ticks) included; no text box overflows (a sentence cut by its box); no glyph is tofu
(drawn as the empty box of a font that lacks it, as the 💡 of the callouts was on a machine without an emoji font).
It still fits at 960x540 and 1920x1080; PageDown / PageUp (a clicker) go to the tour's moments and the arrows step,
without a click into the player, also from the page around the player's frame; "hide the future" draws no slot-grid
cell after the step; a pause writes the step into the file's URL. Screenshots at 1280x720 go to
artifacts/screenshots/presenter-*.png.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import RECORDED, ROOT, recorded_pair

from batchscope.compare.lockstep import lockstep_counters
from batchscope.player.export import player_html
from batchscope.steplog import trace
from batchscope.steplog.view import TraceView

pytestmark = pytest.mark.app

SHOTS = ROOT / "artifacts" / "screenshots"
READY = "window.bsPlayer && bsPlayer.state.drawn >= 0 && bsPlayer.state.complete"

# Every visible text of the page, HTML and SVG: its computed font size and font, and whether it is the narration.
TEXTS = """() => {
  const shown = (e) => { for (let x = e; x && x.nodeType === 1; x = x.parentElement) {
      const cs = getComputedStyle(x);
      if (cs.display === 'none' || cs.visibility === 'hidden' || +cs.opacity === 0) return false; }
    return true; };
  const out = [], walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n; (n = walker.nextNode());) {
    const t = n.textContent.trim(), e = n.parentElement;
    if (!t || !e || e.closest('script, style') || !shown(e)) continue;
    const r = e.getBoundingClientRect();
    if (!r.width || !r.height) continue;
    const cs = getComputedStyle(e);
    out.push({text: t.slice(0, 50), size: parseFloat(cs.fontSize), font: `${cs.fontSize} ${cs.fontFamily}`,
              svg: e instanceof SVGElement, where: e.closest('.bs-plot') ? e.closest('.bs-plot').className : '',
              narration: !!e.closest('.bs-narration')});
  }
  return out; }"""

# HTML boxes holding text whose content does not fit them (cut off, scrolled away, or spilling out).
OVERFLOWING = """() => [...document.querySelectorAll('body *')].filter((e) => {
    if (e instanceof SVGElement || e.closest('svg, script, style') || !e.offsetParent) return false;
    const own = [...e.childNodes].some((c) => c.nodeType === 3 && c.textContent.trim());
    if (!own || getComputedStyle(e).display === 'inline') return false;
    return e.scrollHeight > e.clientHeight + 1 || e.scrollWidth > e.clientWidth + 1;
  }).map((e) => [e.className, e.textContent.slice(0, 60), e.scrollHeight, e.clientHeight, e.scrollWidth,
                 e.clientWidth])"""

# Characters drawn as the missing-glyph box: each (character, font) drawn on a canvas, compared with a code point
# that no font has (U+0378, unassigned).
TOFU = """(pairs) => {
  const c = document.createElement('canvas'); c.width = 80; c.height = 80;
  const g = c.getContext('2d', {willReadFrequently: true});
  const draw = (ch, font) => { g.clearRect(0, 0, 80, 80); g.font = font; g.textBaseline = 'top';
    g.fillStyle = '#000'; g.fillText(ch, 4, 4); return g.getImageData(0, 0, 80, 80).data.join(','); };
  return pairs.filter(([ch, font]) => draw(ch, font) === draw('\\u0378', font)); }"""


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    """The exported files, as ``python -m batchscope html`` writes them (a static/continuous pair gets its counters)."""
    folder = tmp_path_factory.mktemp("presenter")
    out = {}
    for scenario in ("preemption", "sixteen"):
        views = recorded_pair(scenario)
        out[scenario] = folder / f"{scenario}.html"
        html = player_html(views, scenario, counters=lockstep_counters(*views))
        out[scenario].write_text(html, encoding="utf-8")
    out["seed-abcd"] = folder / "seed-abcd.html"
    out["seed-abcd"].write_text(player_html(recorded_pair("seed-abcd")[1:], "seed-abcd"), encoding="utf-8")
    return out


def open_file(browser, path: Path, query: str, width: int = 1280, height: int = 720):
    page = browser.new_page(viewport={"width": width, "height": height})
    page.set_default_timeout(60_000)
    page.goto(path.as_uri() + query)
    page.wait_for_function(READY)
    page.wait_for_function("document.fonts.status === 'loaded'")
    return page


def step_of(page) -> int:
    return int(page.get_attribute("#bs-step", "data-bs-step"))


def check_legible(page, label: str) -> list[dict]:
    """The measurements of one view: sizes, overflow, tofu. Returns the texts measured. The narration (presenter
    mode's headline) is 24 px or more, 20 px in a window under 700 px tall (a 960x540 projector, where 20 px is as
    large on the hall's screen as 26.7 px at 1280x720)."""
    texts = page.evaluate(TEXTS)
    narration = [t for t in texts if t["narration"]]
    least = 24 if page.viewport_size["height"] >= 700 else 20
    assert narration and min(t["size"] for t in narration) >= least, (label, narration[:2])
    small = [(t["size"], t["text"], t["where"]) for t in texts if t["size"] < 18]
    assert not small, (label, small[:8])
    svg = [t for t in texts if t["svg"]]
    # the charts' own labels were measured (a map whose cells the room makes too small for an 18 px label draws
    # none: its colours and outlines, and hover, say what each block holds)
    assert any("bs-slots" in t["where"] or "bs-blocks" in t["where"] for t in svg), label
    assert page.evaluate(OVERFLOWING) == [], label
    pairs = sorted({(ch, t["font"]) for t in texts for ch in t["text"] if ord(ch) > 127})
    assert page.evaluate(TOFU, [list(p) for p in pairs]) == [], label
    return texts


def shot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"presenter-{name}.png"))


def preemption_steps() -> list[int]:
    """Step 0, the first preemption of the continuous run, the step it is recomputed in, and the last step."""
    view = recorded_pair("preemption")[1]
    first = next(k for k, s in enumerate(view.steps) if s["preempted"])
    again = next(k for k, s in enumerate(view.steps) if any(x.get("recompute") for x in s["scheduled"]))
    return [0, first, again, view.num_steps - 1]


@pytest.mark.parametrize("scenario", ["preemption", "sixteen", "seed-abcd"])
def test_presenter_mode_is_legible_at_1280x720(browser, files, scenario):
    steps = preemption_steps() if scenario == "preemption" else [0, 2, 300] if scenario == "sixteen" else [0, 2, 9]
    page = open_file(browser, files[scenario], f"?present=1&step={steps[0]}")
    for k in steps:
        page.evaluate("(k) => bsPlayer.seek(k)", k)
        page.wait_for_function(f"bsPlayer.state.drawn === {k}")
        texts = check_legible(page, f"{scenario} step {k}")
        # the charts' labels were measured, not only the HTML (fewer where the maps' room leaves cells no label)
        assert len([t for t in texts if t["svg"]]) > 10
        shot(page, f"{scenario}-{k}")
    page.close()


def test_presenter_slot_rows_are_as_tall_as_asked(browser, files):
    """A slot row is what presenter mode's room gives it (``BS.presentRoom``: 28 px or more at 1280x720, where the
    names fit in the cells): no room taken under or beside the grid for axis titles it does not draw (a blanked title
    kept 36 px of each: rows of 30 px)."""
    page = open_file(browser, files["preemption"], "?present=1&step=5")
    want = page.evaluate("bsPlayer.sides.map((s) => s.room.slotRow)")
    rows = page.evaluate(
        "[...document.querySelectorAll('.bs-slots')].map((gd) => gd._fullLayout._size.h"
        " / gd._fullLayout.yaxis.categoryarray.length)"
    )
    assert len(rows) == 2 and min(want) >= 28
    assert all(abs(r - w) < 0.5 for r, w in zip(rows, want)), (rows, want)
    page.close()


@pytest.mark.parametrize("size", [(960, 540), (1920, 1080)])
def test_presenter_mode_resizes(browser, files, size):
    k = preemption_steps()[1]
    page = open_file(browser, files["preemption"], f"?present=1&step={k}", *size)
    check_legible(page, f"preemption at {size}")
    assert page.evaluate("document.scrollingElement.scrollWidth") <= size[0]
    # the figures are on the first screen: the slot grids and the budget bars of both sides, and the block maps begin
    tops = page.evaluate(
        "[...document.querySelectorAll('.bs-plot')].filter((e) => e.offsetParent).map((e) => "
        "[e.className, e.getBoundingClientRect().top, e.getBoundingClientRect().bottom])"
    )
    for name, top, bottom in tops:
        assert top < size[1] and ("bs-blocks" in name or bottom <= size[1]), (name, top, bottom)
    shot(page, f"preemption-{k}-{size[0]}x{size[1]}")
    page.close()


def test_clicker_keys_jump_between_moments_and_a_pause_writes_the_url(browser, files):
    """A teacher's tour in the URL: PageDown / PageUp (a clicker) go to its moments and show their notes; past the
    last one PageDown steps; the arrows step; a pause writes the step into the file's URL."""
    page = open_file(browser, files["preemption"], "?present=1&step=10&tour=30:second note;20:first note")
    bar = "document.getElementById('bs-moment').textContent"
    assert page.evaluate(bar) == "Next moment at step 20 (PageDown)"
    page.keyboard.press("PageDown")
    page.wait_for_function(f"bsPlayer.state.drawn === 20 && {bar} === '★ Moment 1 of 2: first note'")
    page.keyboard.press("PageDown")
    page.wait_for_function(f"bsPlayer.state.drawn === 30 && {bar} === '★ Moment 2 of 2: second note'")
    page.keyboard.press("PageDown")  # no moment after 30: one step
    page.wait_for_function("bsPlayer.state.drawn === 31")
    page.keyboard.press("ArrowRight")
    page.wait_for_function("bsPlayer.state.drawn === 32")
    page.keyboard.press("PageUp")
    page.wait_for_function("bsPlayer.state.drawn === 30")
    page.wait_for_function("new URLSearchParams(location.search).get('step') === '30'")
    page.keyboard.press(" ")  # play, then pause: the step it paused at is in the URL
    page.wait_for_function("bsPlayer.state.step > 30")
    page.keyboard.press(" ")
    page.wait_for_function("+new URLSearchParams(location.search).get('step') === bsPlayer.state.step")
    page.close()


@pytest.mark.parametrize("tour,after_10", [("off", 11), ("", "preemption"), ("abc;x:y;:z", "preemption")])
def test_a_tour_can_be_switched_off_and_a_malformed_one_falls_back(browser, files, tour, after_10):
    """?tour=off: PageDown steps one by one; an empty or malformed ?tour= (no entry is a step and a note) keeps the
    moments found in the trace: from step 10 PageDown goes to the first preemption (read from the raw records)."""
    expected = preemption_steps()[1] if after_10 == "preemption" else after_10
    page = open_file(browser, files["preemption"], f"?step=10&tour={tour}")
    page.keyboard.press("PageDown")
    page.wait_for_function(f"bsPlayer.state.drawn === {expected}")
    assert page.is_visible("#bs-moment") == (tour != "off")
    page.close()


def test_keys_on_the_page_around_the_frame_step_the_player(browser, files):
    """The app's frame is a srcdoc frame of the page's origin: keys pressed on the page reach the player."""
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    page.set_default_timeout(60_000)
    page.set_content("<input id='field'><iframe id='f' style='width:1200px;height:700px'></iframe>")
    page.evaluate("(html) => { document.getElementById('f').srcdoc = html; }", files["seed-abcd"].read_text())
    frame = page.frame_locator("#f")
    frame.locator("#bs-step").wait_for()
    inner = page.frames[1]
    inner.wait_for_function(READY)
    page.evaluate("document.body.focus()")
    page.keyboard.press("PageDown")
    inner.wait_for_function("bsPlayer.state.drawn === 1")
    page.focus("#field")  # typing into the page's own field does not step the player
    page.keyboard.press("ArrowRight")
    page.keyboard.press("PageDown")
    assert inner.evaluate("bsPlayer.state.step") == 1
    page.close()


def test_hide_the_future_draws_no_cell_after_the_step(browser, files):
    page = open_file(browser, files["seed-abcd"], "?present=1&step=2")
    last = "Math.max(...bsPlayer.sides[0].dom.slots.data.map((t) => Math.max(...t.base)))"
    assert page.evaluate(last) > 2.5  # the whole window, future included
    page.click("#bs-future")
    page.wait_for_function(f"{last} === 1.5")  # cells start at step - 0.5: the last one drawn is step 2's
    page.keyboard.press("ArrowRight")
    page.wait_for_function(f"bsPlayer.state.drawn === 3 && {last} === 2.5")
    page.wait_for_function("new URLSearchParams(location.search).get('future') === 'hide'")
    shot(page, "seed-abcd-3-hide-future")
    page.close()


def test_callouts_draw_their_bulb_without_an_emoji_font(browser, files):
    """Outside presenter mode too: the callout's bulb is an SVG, and no text of the page is tofu."""
    page = open_file(browser, files["seed-abcd"], "?step=2")
    assert page.evaluate("document.querySelectorAll('.bs-beat svg.bs-icon').length") >= 1
    texts = page.evaluate(TEXTS)
    pairs = sorted({(ch, t["font"]) for t in texts for ch in t["text"] if ord(ch) > 127})
    assert pairs and page.evaluate(TOFU, [list(p) for p in pairs]) == []
    assert page.evaluate(TOFU, [["\U0001f4a1", "20px sans-serif"]]) != [], "the tofu check no longer sees a tofu"
    page.close()


def test_no_emoji_in_the_sources_of_what_the_pages_draw():
    """Pictographs (U+1F000 and up, such as the bulb) need a colour emoji font that a plain Debian machine lacks:
    none in batchscope/ or batchscope/app/. Symbols that DejaVu has (✕ ⟲ ✓ ✗ ␣ ⏎ ⚠) are fine, and so are Streamlit's
    :material/...: icons, which ship with Streamlit."""
    drawing = ("figures", "explain", "quiz", "glossary", "player", "compare", "app")
    sources = sorted(p for d in drawing for p in (ROOT / "batchscope" / d).rglob("*.*"))
    found = [
        (path.relative_to(ROOT).as_posix(), ch)
        for path in sources
        if path.suffix in {".py", ".js", ".css", ".html"}
        for ch in sorted(set(path.read_text(encoding="utf-8")))
        if ord(ch) >= 0x1F000
    ]
    assert found == []


def _lab(hex_color: str) -> tuple[float, float, float]:
    """CIE L*a*b* (D65) of an sRGB colour ``#RRGGBB``."""
    lin = [(c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4) for c in _rgb(hex_color)]
    x, y, z = (sum(m * c for m, c in zip(row, lin)) for row in _XYZ)
    f = [t ** (1 / 3) if t > 216 / 24389 else (24389 / 27 * t + 16) / 116 for t in (x / 0.95047, y, z / 1.08883)]
    return 116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])


_XYZ = ((0.4124, 0.3576, 0.1805), (0.2126, 0.7152, 0.0722), (0.0193, 0.1192, 0.9505))


def _rgb(hex_color: str) -> list[float]:
    return [int(hex_color[i : i + 2], 16) / 255 for i in (1, 3, 5)]


def _washed(hex_color: str, white: float = 0.35) -> str:
    """The colour on a washed-out projector: a third of the way to white."""
    return "#" + "".join(f"{round(255 * (c + (1 - c) * white)):02X}" for c in _rgb(hex_color))


def _contrast(a: str, b: str) -> float:
    """WCAG contrast ratio of two colours."""
    y = sorted(((_lab(c)[0] + 16) / 116) ** 3 if _lab(c)[0] > 8 else _lab(c)[0] / 903.3 for c in (a, b))
    return (y[1] + 0.05) / (y[0] + 0.05)


def test_presenter_palette_stays_distinct_washed_out_and_in_grey(browser, files):
    """The request colours drawn in presenter mode (slot grid cells, read from the page): at least 3:1 against the
    page; pairwise apart in colour, also washed out; the first four apart in grey; all far from the padding, free,
    cached and reserved colours (which must stay what they are)."""
    import itertools
    import math

    from batchscope.figures.kv import CACHED_COLOR, RESERVED_COLOR
    from batchscope.steplog.view import FREE_COLOR, PADDING_COLOR

    page = open_file(browser, files["sixteen"], "?present=1&step=0")
    got = page.evaluate(
        """() => ({page: getComputedStyle(document.body).backgroundColor, colors: bsPlayer.sides[1].v.colors,
          drawn: [...new Set(bsPlayer.sides.flatMap((s) => s.dom.slots.data.flatMap((t) => t.marker.color)))]})"""
    )
    assert got["page"] == "rgb(255, 255, 255)"
    colors = got["colors"]
    assert len(set(colors)) == 16 and set(got["drawn"]) <= {*colors, PADDING_COLOR}
    de = math.dist
    for c in colors:
        assert _contrast(c, "#FFFFFF") >= 3, c
        for other in (PADDING_COLOR, FREE_COLOR, CACHED_COLOR, RESERVED_COLOR):
            assert de(_lab(c), _lab(other)) >= 40 and abs(_lab(c)[0] - _lab(other)[0]) >= 5, (c, other)
    for a, b in itertools.combinations(colors, 2):
        assert de(_lab(a), _lab(b)) >= 15 and de(_lab(_washed(a)), _lab(_washed(b))) >= 9, (a, b)
        assert abs(_lab(a)[0] - _lab(b)[0]) >= 1.5, (a, b)  # never the same grey
    for a, b in itertools.combinations(colors[:4], 2):  # A-D of the 3- and 4-slot demos: four distinct greys
        assert abs(_lab(a)[0] - _lab(b)[0]) >= 12, (a, b)
    page.close()


def test_prefix_cache_hits_are_marked_in_the_block_map():
    """A block found in the prefix cache in a step carries ★ (and, unless allocated in that same step, a blue
    outline), from the step's num_prefix_hit_tokens: a hit of N tokens is the first N // block_size blocks of the
    request's table. shared-prefix: B finds A1's first 3 blocks (24 tokens) at step 0."""
    from batchscope.figures.kv import HIT_LINE, HIT_MARK, block_marks

    view = TraceView(trace.read(RECORDED / "shared-prefix-continuous.jsonl"))
    m = block_marks(view, 0)
    assert view.steps[0]["num_prefix_hit_tokens"]["B"] == 24 and view.header["config"]["block_size"] == 8
    assert [b for b, t in enumerate(m["text"]) if HIT_MARK in t] == list(view.block_tables(0)["B"][:3])
    outlined = 0
    for k, st in enumerate(view.steps):
        m = block_marks(view, k)
        hits = sum(n // 8 for n in st["num_prefix_hit_tokens"].values())
        assert sum(HIT_MARK in t for t in m["text"]) == hits, k
        outlined += m["line"].count(HIT_LINE)
    assert outlined > 0


@pytest.mark.parametrize("size", [(1280, 720), (1920, 1080)])
def test_outside_presenter_mode_nothing_is_cut_off(browser, files, size):
    """The pages' own player (not presenter mode): the narration grows to its whole sentence (sixteen's static side
    at step 400 tells 1362 characters), the counter cards and every other text box fit, and no glyph is tofu."""
    page = open_file(browser, files["sixteen"], "?step=400", *size)
    assert page.evaluate(OVERFLOWING) == []
    assert page.evaluate("document.scrollingElement.scrollWidth") <= size[0]
    texts = page.evaluate(TEXTS)
    pairs = sorted({(ch, t["font"]) for t in texts for ch in t["text"] if ord(ch) > 127})
    assert page.evaluate(TOFU, [list(p) for p in pairs]) == []
    page.close()


def test_download_stills_gives_the_charts_of_the_step_in_one_png(browser, files, tmp_path):
    """The player's "↓ stills" button: one PNG of the step's charts (slot grid, budget, KV blocks; a column per side)
    at twice their size on the screen, named by the title and the step."""
    import imageio.v3 as iio

    page = open_file(browser, files["preemption"], "?step=27")
    sizes = page.evaluate(
        "bsPlayer.sides.map((s) => ['slots', 'budget', 'blocks'].map((k) => [s.dom[k].clientWidth, "
        "s.dom[k].clientHeight]))"
    )
    with page.expect_download() as got:
        page.click("#bs-stills")
    assert got.value.suggested_filename == "preemption-step-27.png"
    path = tmp_path / "still.png"
    got.value.save_as(path)
    image = iio.imread(path)
    width = sum(2 * max(w for w, _ in side) for side in sizes)
    height = max(sum(2 * h for _, h in side) for side in sizes)
    assert image.shape[1] == width and image.shape[0] > height  # the charts under a heading band (title, step)
    assert len({tuple(px) for px in image[::40, ::40, :3].reshape(-1, 3)}) > 8  # the charts, not a blank page
    page.close()


# Every visible HTML text: its colour and the colour of the nearest ancestor with a background (the page's if none).
TEXT_ON_GROUND = """() => {
  const rgb = (s) => (s.match(/[\\d.]+/g) || []).map(Number), out = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n; (n = walker.nextNode());) {
    const e = n.parentElement;
    if (!n.textContent.trim() || !e || e.closest('script, style, svg') || !e.offsetParent) continue;
    let g = e;
    while (g && (rgb(getComputedStyle(g).backgroundColor)[3] === 0 ||
                 getComputedStyle(g).backgroundColor === 'transparent')) g = g.parentElement;
    out.push([n.textContent.trim().slice(0, 40), rgb(getComputedStyle(e).color),
              rgb(getComputedStyle(g || document.body).backgroundColor)]);
  }
  return out; }"""


@pytest.mark.parametrize("present", ["1", "0"])
def test_the_dark_page_keeps_every_text_and_colour_apart(browser, files, present):
    """?theme=dark (dim halls): a dark page; every HTML text at least 4.5:1 on its ground; the request colours at least
    3:1 against the page, apart from each other (also washed out; the first four in grey) and from the dark padding,
    free, cached and reserved colours; presenter mode still legible (sizes, nothing cut, no tofu)."""
    import itertools
    import math

    page = open_file(browser, files["sixteen"], f"?present={present}&step=12&theme=dark")
    assert page.evaluate("getComputedStyle(document.body).backgroundColor") == "rgb(21, 24, 29)"
    hexed = lambda c: "#" + "".join(f"{round(x):02X}" for x in c[:3])  # noqa: E731
    low = [(t, f, g) for t, f, g in page.evaluate(TEXT_ON_GROUND) if _contrast(hexed(f), hexed(g)) < 4.5]
    assert low == [], low[:5]
    got = page.evaluate(
        """() => ({colors: bsPlayer.sides[1].v.colors, base: BS.DARK_BASE,
          drawn: [...new Set(bsPlayer.sides.flatMap((s) => s.dom.slots.data.flatMap((t) => t.marker.color)))]})"""
    )
    colors, dark_base = got["colors"], list(got["base"].values())
    assert len(set(colors)) == 16 and set(got["drawn"]) <= {*colors, got["base"]["#9E9E9E"]}
    for c in colors:
        assert _contrast(c, "#15181D") >= 3, c
        for other in dark_base:
            assert math.dist(_lab(c), _lab(other)) >= 40 and abs(_lab(c)[0] - _lab(other)[0]) >= 5, (c, other)
    for a, b in itertools.combinations(colors, 2):
        assert math.dist(_lab(a), _lab(b)) >= 15 and math.dist(_lab(_washed(a)), _lab(_washed(b))) >= 9, (a, b)
        assert abs(_lab(a)[0] - _lab(b)[0]) >= 1.5, (a, b)
    for a, b in itertools.combinations(colors[:4], 2):
        assert abs(_lab(a)[0] - _lab(b)[0]) >= 12, (a, b)
    if present == "1":
        check_legible(page, "sixteen dark")
    shot(page, f"sixteen-12-dark{'-present' if present == '1' else ''}")
    page.close()


def test_the_key_names_one_freed_mark_for_every_engine(browser, tmp_path):
    """Found in a lecturer's trial: vLLM vs SGLang listed "⟲ (dark outline)" twice, freed by preemption and freed by
    retraction. One item now names both words, each taken from its side's run (the vLLM run preempts, SGLang's
    retracts: read from their trace files)."""
    views = recorded_pair("vllm-vs-sglang")
    evicting = [v for v in views if any(st["preempted"] for st in v.steps)]
    assert len(evicting) == 2
    path = tmp_path / "pair.html"
    path.write_text(player_html(views, "vllm-vs-sglang"), encoding="utf-8")
    page = open_file(browser, path, "?present=1&step=53")
    items = page.evaluate("[...document.querySelectorAll('#bs-key .bs-key-item')].map((e) => e.textContent)")
    freed = [t for t in items if t.startswith("⟲")]
    assert len(freed) == 1 and "preemption" in freed[0] and "retraction" in freed[0], items
    page.close()
