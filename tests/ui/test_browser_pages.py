"""Real browser: `streamlit run app.py` on a free loopback port, driven by Debian's Chromium through Playwright.

Every page loads without an error element and is screenshotted (artifacts/screenshots/; with
BATCHSCOPE_UPDATE_SCREENSHOTS=1 into docs/screenshots/, which the README shows); the step controls and Play move
the step; the lockstep page keeps both sides on one step in the browser player and its step in the URL; live runs
on a tiny model complete for two users at once. Live runs use a tiny random Llama with SmolLM2's tokenizer
(``$BATCHSCOPE_MODEL``) so they take seconds.
"""

from __future__ import annotations

import os

import pytest
from conftest import RECORDED, ROOT

from batchscope.tools.app_server import streamlit_app

pytestmark = pytest.mark.app

ARTIFACTS = ROOT / "artifacts/screenshots"
SHOTS = ROOT / "docs/screenshots" if os.environ.get("BATCHSCOPE_UPDATE_SCREENSHOTS") else ARTIFACTS
# A limit, not a wait: every wait is on the app's own signal. Sized for a machine loaded by other work (a first
# Playground visit loads the model; seen over 90 s with a CI run and a test suite sharing 2 cores).
TIMEOUT_MS = 240_000


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory):
    """A 2-layer random Llama saved with SmolLM2's tokenizer and chat template (so text prompts work)."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from batchscope.model.models import default_model_path

    folder = tmp_path_factory.mktemp("tiny-llama")
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=49152,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=2,
        tie_word_embeddings=True,
    )
    LlamaForCausalLM(cfg).save_pretrained(folder)
    AutoTokenizer.from_pretrained(default_model_path()).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def server(tiny_model_dir):
    with streamlit_app(env={"BATCHSCOPE_MODEL": str(tiny_model_dir)}) as url:
        yield url


def open_page(browser, url, height=1400):
    page = browser.new_page(viewport={"width": 1600, "height": height})
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(url)
    return page


def wait_ready(page, min_charts: int) -> None:
    page.wait_for_function(f"document.querySelectorAll('.js-plotly-plot').length >= {min_charts}")
    page.wait_for_function("!document.querySelector('[data-testid=\"stStatusWidget\"]')")
    assert page.locator('[data-testid="stException"]').count() == 0


def shot(page, name: str, docs: bool = True) -> None:
    """A screenshot of the whole page into artifacts/screenshots/, or docs/screenshots/ (``docs``: one the docs show)
    with BATCHSCOPE_UPDATE_SCREENSHOTS=1."""
    folder = SHOTS if docs else ARTIFACTS
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / f"{name}.png"), full_page=True)


def player_frame(page, step: int | None = None, min_charts: int = 8):
    """The browser player's frame on a page, once it has drawn (at ``step`` if given)."""
    frame = page.wait_for_selector("iframe").content_frame()
    frame.wait_for_function("window.bsPlayer && bsPlayer.state.drawn >= 0 && bsPlayer.state.complete")
    if step is not None:
        frame.wait_for_function(f"document.getElementById('bs-step').dataset.bsStep === '{step}'")
    frame.wait_for_function(f"document.querySelectorAll('.js-plotly-plot').length >= {min_charts}")
    return frame


def chart_frames(page, count: int) -> list:
    """The page's ``count`` chart frames (``batchscope.figures.figure_frame``), once each has drawn all its figures."""
    page.wait_for_function(f"document.querySelectorAll('iframe[srcdoc*=\"bs-figures\"]').length >= {count}")
    frames = [f.content_frame() for f in page.query_selector_all('iframe[srcdoc*="bs-figures"]')]
    for frame in frames:
        frame.wait_for_function("document.body.dataset.bsDrawn")
    return frames


# the types of the traces that the loaded plotly.js cannot draw: it has no module for them, and draws an invisible
# scatter in their place
UNDRAWABLE = """[...document.querySelectorAll('.js-plotly-plot')].flatMap((gd) => (gd._fullData || [])
  .map((t) => (gd.data[t.index] || {}).type || 'scatter').filter((type, i) => type !== gd._fullData[i].type))"""
PAGES = [
    ("walkthrough", "/?step=2", 0, 2200),
    ("compare", "/compare?scenario=sixteen&step=300", 0, 2400),
    ("metrics", "/metrics?scenario=sixteen", 0, 2600),
    ("trace", "/trace?step=3", 0, 2400),
]
PLAYER_STEP = {"walkthrough": 2, "compare": 300, "trace": 3}  # pages whose views play in the browser player


@pytest.mark.parametrize("name,path,charts,height", PAGES, ids=[p[0] for p in PAGES])
def test_page_loads_without_error_or_outside_request(browser, server, name, path, charts, height):
    page = browser.new_page(viewport={"width": 1600, "height": height})
    page.set_default_timeout(TIMEOUT_MS)
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto(server + path)
    wait_ready(page, charts)
    if name in PLAYER_STEP:  # the per-step views play in the browser player's frame; ?step= lands there
        player_frame(page, step=PLAYER_STEP[name], min_charts=4)
    if name == "metrics":  # seven charts in three frames of their own (the step cost on this CPU and on a GPU)
        frames = chart_frames(page, 3)
        assert sum(f.evaluate("document.querySelectorAll('.js-plotly-plot').length") for f in frames) == 7
    for frame in page.frames:  # every trace's type is one the served plotly.js bundle draws (its basic bundle)
        unknown = frame.evaluate(UNDRAWABLE)
        assert unknown == [], f"{name}: plotly.js has no module for {unknown}"
    shot(page, name)
    outside = [u for u in requests if not u.startswith((server, "data:", "blob:"))]
    assert outside == [], f"the app asked the network for {outside[:5]}"
    page.close()


def test_step_buttons_and_play_move_the_step(browser, server):
    page = open_page(browser, server + "/")
    frame = player_frame(page, step=0, min_charts=4)
    frame.get_by_text("Step 0:").first.wait_for()
    frame.locator("#bs-fwd").click()
    frame.get_by_text("Step 1:").first.wait_for()
    frame.get_by_text("Why D (head of the queue) waits").first.wait_for()  # the head-of-queue checklist
    frame.locator("#bs-play").click()  # the browser player advances on its own clock (8 steps/s: Step 3 is brief)
    frame.wait_for_function("+document.getElementById('bs-step').dataset.bsStep >= 3")
    frame.locator("#bs-play").click()  # pause
    assert page.locator('[data-testid="stException"]').count() == 0
    page.close()


def test_lockstep_sides_show_the_same_step_and_the_url_keeps_it(browser, server):
    page = open_page(browser, server + "/compare?scenario=seed-abcd&step=4")
    frame = player_frame(page, step=4)
    frame.get_by_text("Static · step 4").wait_for()
    frame.get_by_text("Continuous · step 4").wait_for()
    frame.locator("#bs-fwd").click()
    frame.get_by_text("Static · step 5").wait_for()
    frame.get_by_text("Continuous · step 5").wait_for()
    page.wait_for_url("**step=5**")  # paused: the player wrote its step into the page's address
    page.reload()
    player_frame(page, step=5).get_by_text("Continuous · step 5").wait_for()
    page.close()


def test_two_users_run_live_at_once_and_each_gets_their_own_trace(browser, server):
    a = open_page(browser, server + "/playground", 2400)
    b = browser.new_context().new_page()
    b.set_viewport_size({"width": 1600, "height": 1400})
    b.set_default_timeout(TIMEOUT_MS)
    b.goto(server + "/playground")
    for p in (a, b):
        p.locator(".st-key-pg-run button").wait_for()
    b.locator(".st-key-pg-runs").click()  # user B: A vs B, run B with chunked prefill off
    b.get_by_role("option", name="A vs B").click()
    b.locator(".st-key-pg-b-chunked label").click()
    b.get_by_text("enable_chunked_prefill: on → off").wait_for()
    a.locator(".st-key-pg-run button").click()
    b.locator(".st-key-pg-run button").click()
    frame = player_frame(a, step=0)  # user A: both policies side by side, in the browser player
    frame.get_by_text("Static · step 0").wait_for()
    frame.get_by_text("Continuous · step 0").wait_for()
    frame_b = player_frame(b, step=0)  # user B: run A and run B on one step clock, told apart
    frame_b.get_by_text("A · continuous · step 0").wait_for()
    frame_b.get_by_text("B · continuous · step 0").wait_for()
    b.get_by_text("What differs (A → B): enable_chunked_prefill: on → off").wait_for()
    for p in (a, b):
        assert p.locator('[data-testid="stException"]').count() == 0
    wait_ready(a, 0)
    shot(a, "playground")
    wait_ready(b, 0)
    shot(b, "playground-a-vs-b")
    b.get_by_text("Open this pair on the Compare runs page").click()  # same session: the pair opens there
    b.wait_for_url("**/compare?**")
    b.wait_for_function(  # the new page's player (the Playground's frame may still be on its way out)
        """() => { const f = document.querySelector('iframe'), w = f && f.contentWindow;
          return !!(w && w.bsPlayer && w.document.body.textContent.includes('B · continuous · step 0')); }"""
    )
    assert "run+B" in b.url or "run%20B" in b.url
    a.close()
    b.close()


def test_export_then_import_gives_back_the_same_trace_and_a_bad_file_is_refused(browser, server, tmp_path):
    from batchscope.steplog import trace

    page = open_page(browser, server + "/trace")
    player_frame(page, min_charts=4)
    page.wait_for_function("!document.querySelector('[data-testid=\"stStatusWidget\"]')")  # the run has ended
    with page.expect_download() as dl:
        page.locator(".st-key-trace-export button").click()
    exported = tmp_path / "exported.jsonl"
    dl.value.save_as(exported)
    original = trace.read(RECORDED / "seed-abcd-continuous.jsonl")
    assert trace.read(exported) == trace.read(RECORDED / dl.value.suggested_filename)
    page.locator(".st-key-trace-choice").click()
    page.keyboard.type("upload a file")  # the list is long (every shipped run): filter it, as a user would
    page.get_by_role("option", name="upload a file").click()
    bad = tmp_path / "bad.jsonl"
    lines = exported.read_text().splitlines()
    bad.write_text("\n".join(lines[:3] + lines[4:]) + "\n")  # a step missing in the middle: not a cut-short trace
    page.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(str(bad))
    page.get_by_text("bad.jsonl is not a valid Batchscope trace").wait_for()
    assert page.locator('[data-testid="stException"]').count() == 0
    good = tmp_path / "good.jsonl"
    good.write_text(trace.dumps(original))
    page.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(str(good))
    page.get_by_text("Imported file").first.wait_for()
    player_frame(page, min_charts=4)
    page.close()


def test_a_vllm_tracer_trace_opens_with_its_provenance(browser, server, tmp_path):
    """The tracer's fixture, gzipped, uploaded on the Trace page: badge, narration and figures, no error."""
    import gzip

    packed = tmp_path / "server.jsonl.gz"
    packed.write_bytes(gzip.compress((ROOT / "tests" / "data" / "vllm-seed-abcd.jsonl").read_bytes()))
    page = open_page(browser, server + "/trace")
    player_frame(page, min_charts=4)
    page.locator(".st-key-trace-choice").click()
    page.keyboard.type("upload a file")  # the list is long (every shipped run): filter it, as a user would
    page.get_by_role("option", name="upload a file").click()
    page.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(str(packed))
    page.get_by_text("vLLM 0.33.0 server, model-free").first.wait_for()
    player_frame(page, step=0, min_charts=4).get_by_text("Step 0:").first.wait_for()
    assert page.locator('[data-testid="stAlertContentError"]').count() == 0
    page.close()


@pytest.mark.parametrize(
    "path,size",
    [
        ("/?present=1&step=5", (1280, 720)),
        ("/compare?scenario=sixteen&present=1&step=40", (1280, 720)),
        ("/trace?present=1", (1280, 720)),
        ("/compare?scenario=vllm-vs-sglang&present=1&step=53", (1920, 1080)),
        ("/compare?scenario=vllm-vs-sglang&present=1&step=53", (960, 540)),
    ],
)
def test_presenter_mode_in_the_app_is_the_player_alone_within_1280x720(browser, server, path, size):
    """?present=1 on a page: no sidebar, header, title, intro or pickers; the player's frame is the window, whatever
    its size (it was 720 px tall at 1920x1080 too), without scrolling, and the player's figures and every headline
    are inside it (its own presenter mode, issue 36); a key pressed on the page steps it."""
    width, height = size
    page = browser.new_page(viewport={"width": width, "height": height})
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(server + path)
    frame = player_frame(page, min_charts=3)
    wait_ready(page, 0)
    got = page.evaluate(
        """() => { const main = document.querySelector('[data-testid="stMain"]'), r = document.querySelector('iframe')
            .getBoundingClientRect(), shown = (e) => e.offsetParent !== null;
          return {h1: [...document.querySelectorAll('h1')].filter(shown).length,
                  sidebar: [...document.querySelectorAll('[data-testid="stSidebar"]')].filter(shown).length,
                  scroll: [main.scrollHeight, main.clientHeight, document.scrollingElement.scrollHeight],
                  frame: [r.top, r.bottom, r.width]}; }"""
    )
    assert got["h1"] == 0 and got["sidebar"] == 0, got
    assert got["scroll"][0] <= got["scroll"][1] and got["scroll"][2] <= height, got
    assert got["frame"][0] >= 0 and height - 1 <= got["frame"][1] <= height and got["frame"][2] >= width - 80, got
    inner = frame.evaluate(
        "[document.scrollingElement.scrollWidth, document.body.classList.contains('present'), Math.max("
        "...[...document.querySelectorAll('.bs-slots, .bs-budget, .bs-narration')]"
        ".filter((e) => e.offsetParent).map((e) => e.getBoundingClientRect().bottom)), innerHeight]"
    )
    assert inner[0] <= width and inner[1] and inner[2] <= inner[3] and inner[3] >= height - got["frame"][0] - 1, inner
    k = frame.evaluate("bsPlayer.state.step")
    page.keyboard.press("ArrowRight")  # pressed on the page around the frame, no click into it first
    frame.wait_for_function(f"bsPlayer.state.drawn === {k + 1}")
    name = path.split("?")[0].strip("/") or "walkthrough"
    shot(page, f"present-{name}-{width}x{height}", docs=name == "compare")  # the docs show Compare's three sizes
    page.close()


def test_compare_page_takes_an_uploaded_trace_and_refuses_another_workload(browser, server, tmp_path):
    """Run B uploaded: the continuous seed-abcd trace against the recorded static one plays as the static vs
    continuous pair; a trace of another workload (sixteen) is refused with the first difference."""
    page = open_page(browser, server + "/compare?a=seed-abcd+%2F+static&b=seed-abcd+%2F+static", 2400)
    player_frame(page, min_charts=4)
    page.get_by_role("button", name="Choose other runs").click()  # the run pickers' popover
    page.locator(".st-key-lock-b-batching").click()  # run B's picker of the static vs continuous pair
    page.locator(".st-key-lock-b-batching input").press_sequentially("upload")  # the list shows its first options
    page.get_by_role("option", name="upload a file").click()
    page.get_by_text("Upload the trace to compare").wait_for()
    upload = page.locator(".st-key-lock-b-upload [data-testid='stFileUploaderDropzoneInput']")
    upload.set_input_files(str(RECORDED / "seed-abcd-continuous.jsonl"))
    page.get_by_text("Imported file").first.wait_for()
    page.wait_for_function(
        """() => { const f = document.querySelector('iframe'), w = f && f.contentWindow;
          return !!(w && w.bsPlayer && w.document.body.textContent.includes('Continuous · step 0')); }"""
    )
    upload.set_input_files(str(RECORDED / "sixteen-continuous.jsonl"))
    page.get_by_text("not of one workload").wait_for()
    assert page.locator('[data-testid="stException"]').count() == 0
    page.close()


# Widget labels Streamlit cuts short with an ellipsis (a label that does not wrap, wider than its column).
CUT_LABELS = """(keys) => keys.flatMap((k) => [...document.querySelectorAll(
  `.st-key-${k} [data-testid="stWidgetLabel"] *`)].filter((e) => e.scrollWidth > e.clientWidth + 1)
  .map((e) => e.textContent))"""


def test_run_b_toggles_read_whole_at_1280x720(browser, server):
    """Run B's knobs sit in four columns of the A vs B box: its toggles' labels do not wrap, so their column must
    fit them ("Full-prompt admis…" and "Mixed chunks (SGL…" were cut)."""
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(server + "/playground")
    page.locator(".st-key-pg-run button").wait_for()
    page.locator(".st-key-pg-runs").click()
    page.get_by_role("option", name="A vs B").click()
    page.locator(".st-key-pg-b-mixed label").wait_for()
    page.wait_for_function("!document.querySelector('[data-testid=\"stStatusWidget\"]')")
    shot(page, "playground-a-vs-b")
    toggles = [f"pg{side}-{k}" for side in ("", "-b") for k in ("chunked", "prefix", "fullprompt", "mixed")]
    assert page.evaluate(CUT_LABELS, toggles) == []
    page.close()


# Text the Glossary cuts at a box's edge: a code block that scrolls sideways, a link label wider than its line.
CUT_GLOSSARY = """() => [...document.querySelectorAll('[data-testid="stCode"] pre, [data-testid="stPageLink"] p')]
  .filter((e) => e.scrollWidth > e.clientWidth + 1).map((e) => e.textContent.slice(0, 60))"""


def test_glossary_cuts_no_formula_or_link_at_1280x720(browser, server):
    """Every term's formula wraps and every "See it" link reads whole (the vLLM and SGLang metric tables ran past
    their boxes, and a link's label with what the step shows was cut mid-number)."""
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(server + "/glossary")
    page.get_by_text("SGLang's production metrics").first.wait_for()
    # every term's box drawn: its formula (20 of the 31 terms have one) and its "See it" link
    page.wait_for_function(
        "document.querySelectorAll('[data-testid=\"stCode\"] pre').length >= 20"
        " && document.querySelectorAll('[data-testid=\"stPageLink\"]').length >= 31"
    )
    assert page.evaluate(CUT_GLOSSARY) == []
    page.close()


def test_all_steps_table_of_a_static_trace_fits_1280x720(browser, server):
    """The whole trace's table under "All steps": a static trace's ten columns fit the page's width (they needed
    921 px of its 784 and the grid scrolled sideways); the headings are shorter there, each whole name on hover."""
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(server + "/trace?scenario=sixteen&policy=static")
    page.get_by_text("All steps").first.click()
    page.locator('[data-testid="stDataFrame"] .dvn-scroller').first.wait_for()
    widths = page.evaluate(
        "() => { const s = document.querySelector('[data-testid=\"stDataFrame\"] .dvn-scroller');"
        " return [s.scrollWidth, s.clientWidth]; }"
    )
    assert widths[0] <= widths[1] + 1, widths
    page.close()


FOUR = ("continuous", "sglang", "tgi", "trtllm")  # vLLM's, SGLang's, TGI's and TensorRT-LLM's recorded runs
# every side's heading step and whether it says it holds, with the clock's step, read in one go
SIDES = """() => [+document.getElementById('bs-step').dataset.bsStep, ...[...document.querySelectorAll('.bs-side')]
  .map((s) => [+/step (\\d+)$/.exec(s.querySelector('.bs-side-head').textContent)[1],
               !s.querySelector('.bs-note').hidden])]"""


def test_four_engines_play_on_one_clock_in_the_app(browser, server):
    """The four-way Compare page of the shipped four-engines runs: one step clock, the longest run's (TGI's); at every
    step sampled, each side whose run goes on shows the clock's step and each run that ended holds its last step and
    says so (each run's length read from its trace file, not from the page)."""
    from conftest import RECORDED, step_records

    from batchscope.steplog import trace

    lengths = [step_records(trace.read(RECORDED / f"four-engines-{p}.jsonl"))[-1]["step"] + 1 for p in FOUR]
    query = "&".join(f"{side}=four-engines / {p}" for side, p in zip("abcd", FOUR))
    page = open_page(browser, server + f"/compare?scenario=four-engines&runs=4&{query}", height=1800)
    frame = player_frame(page, step=0)
    n = max(lengths)
    assert frame.evaluate("bsPlayer.sides.length") == 4 and frame.evaluate("bsPlayer.n") == n
    for k in sorted({0, 1, 7, *lengths, *(m - 1 for m in lengths), n // 2} - {n}):
        frame.evaluate(f"bsPlayer.seek({k})")
        frame.wait_for_function(f"bsPlayer.state.drawn === {k}")
        assert frame.evaluate(SIDES) == [k, *[[min(k, m - 1), k > m - 1] for m in lengths]], k
    frame.evaluate(f"bsPlayer.seek({n - 20})")
    frame.wait_for_function(f"bsPlayer.state.drawn === {n - 20}")
    for k in range(n - 19, n):  # the last steps one key at a time: the shorter runs hold, TGI's goes on
        frame.locator("body").press("ArrowRight")
        frame.wait_for_function(f"bsPlayer.state.drawn === {k}")
        assert frame.evaluate(SIDES) == [k, *[[min(k, m - 1), k > m - 1] for m in lengths]], k
    assert page.locator('[data-testid="stException"]').count() == 0
    page.close()
