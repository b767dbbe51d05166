"""Four runs of one workload in the exported player (Debian's Chromium through Playwright): one step clock, the
longest run's. After every step and on every frame while playing, each side whose run has not ended shows the
clock's step, a side whose run has ended shows its last step and says it holds, and no side drifts after idle steps
(the runs sit idle at different positions of the clock: ``TraceView.steps`` puts each idle step on it)."""

from __future__ import annotations

import pytest
from fakes import EOS, FakeRunner

from batchscope.compare.lockstep import runs_counters
from batchscope.engine.config import EngineConfig
from batchscope.engine.engine import LLMEngine
from batchscope.engine.request import Request, SamplingParams
from batchscope.player.export import player_html
from batchscope.steplog.view import TraceView

pytestmark = pytest.mark.app

READY = "window.bsPlayer && bsPlayer.state.drawn >= 0 && bsPlayer.state.complete"
# every side's heading step and whether it says it holds, with the clock's step, read in one go
SIDES = """() => [+document.getElementById('bs-step').dataset.bsStep, ...[...document.querySelectorAll('.bs-side')]
  .map((s) => [+/step (\\d+)$/.exec(s.querySelector('.bs-side-head').textContent)[1],
               !s.querySelector('.bs-note').hidden])]"""
# the same on every animation frame from the start of playback until the clock's last step is drawn
PLAY_AND_RECORD = (
    "(last) => { const read = ("
    + SIDES
    + """); window.__seen = [];
  const f = () => { window.__seen.push(read()); if (bsPlayer.state.drawn !== last || bsPlayer.state.playing)
    requestAnimationFrame(f); };
  bsPlayer.setSpeed(15); bsPlayer.play(); requestAnimationFrame(f); }"""
)

CONFIGS = (  # four schedulers of one workload: their idle steps and ends fall at different steps
    {"batching": "static"},
    {"batching": "continuous"},
    {"batching": "sglang", "block_size": 1, "num_kv_blocks": 64},
    {"batching": "continuous", "max_num_seqs": 1},
)


def requests() -> list[Request]:
    """A and B at step 0, C and D at step 20: idle steps between them."""
    spec = (("A", 10, 8, 6, 0), ("B", 30, 5, 3, 0), ("C", 40, 6, 4, 20), ("D", 50, 3, 3, 20))
    return [
        Request(rid, list(range(t0, t0 + n)), SamplingParams(max_tokens=m), arrival_step=at)
        for rid, t0, n, m, at in spec
    ]


@pytest.fixture(scope="module")
def views() -> list[TraceView]:
    out = []
    for config in CONFIGS:
        cfg = EngineConfig(**{"block_size": 4, "num_kv_blocks": 16, **config})
        out.append(TraceView(LLMEngine(FakeRunner(), cfg, eos_token_ids={EOS}).run(requests())))
    return out


def idle_steps(v: TraceView) -> list[int]:
    return [k for k, st in enumerate(v.steps) if st.get("idle")]


def expected(views: list[TraceView], k: int) -> list:
    """What the page must show at clock step ``k``: the step, then per side its step and whether it holds."""
    return [k, *[[min(k, v.num_steps - 1), k > v.num_steps - 1] for v in views]]


def test_the_runs_are_of_one_workload_with_idle_steps_at_different_places(views):
    from batchscope.compare.runs import same_workloads

    assert same_workloads(views)[0]
    idle = [idle_steps(v) for v in views]
    assert all(idle) and idle[0] != idle[3]  # one slot: D's run goes idle later
    assert len({v.num_steps for v in views}) > 1  # and ends later: the others hold


def test_four_sides_step_on_one_clock_without_drift(browser, views, tmp_path):
    path = tmp_path / "four.html"
    path.write_text(player_html(views, "four", window=8, counters=runs_counters(views)), encoding="utf-8")
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    page.set_default_timeout(60_000)
    page.goto(path.as_uri())
    page.wait_for_function(READY)
    n = max(v.num_steps for v in views)
    assert page.evaluate("bsPlayer.sides.length") == 4 and page.evaluate("bsPlayer.n") == n
    assert page.evaluate(SIDES) == expected(views, 0)
    for k in range(1, n):  # one step at a time, through every idle step of every run
        page.keyboard.press("ArrowRight")
        page.wait_for_function(f"bsPlayer.state.drawn === {k}")
        assert page.evaluate(SIDES) == expected(views, k), k
        for i, v in enumerate(views):  # an idle step is drawn as one, on its side
            if k in idle_steps(v):
                text = page.evaluate(f"document.querySelectorAll('.bs-narration')[{i}].textContent")
                assert "idle" in text, (i, k, text)
    page.keyboard.press("Home")
    page.wait_for_function("bsPlayer.state.drawn === 0")
    page.evaluate(PLAY_AND_RECORD, n - 1)
    page.wait_for_function(f"!bsPlayer.state.playing && bsPlayer.state.drawn === {n - 1} && window.__seen.length > 1")
    seen = page.evaluate("window.__seen")
    # steps were seen while playing, in order (how many depends on the machine's frame rate: a loaded CI machine
    # drew 6 of 27; the frames drawn, however few, must each be right)
    clock = [s[0] for s in seen]
    assert len(set(clock)) >= 2 and clock == sorted(clock)
    for s in seen:  # every frame: every side at the clock's step, or holding its last
        assert s == expected(views, s[0]), s
    page.close()


def test_presenter_mode_steps_four_sides_together(browser, views, tmp_path):
    """``?present=1`` with four sides at 1280x720: every side's figures are drawn (four columns, one a side: the
    screen's height is what presenter mode lacks, tests/ui/test_browser_presenter_fit.py), and a key steps all four
    at once."""
    path = tmp_path / "four.html"
    path.write_text(player_html(views, "four", window=8), encoding="utf-8")
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    page.set_default_timeout(60_000)
    page.goto(path.as_uri() + "?present=1&step=5")
    page.wait_for_function(READY)
    assert page.evaluate("document.body.classList.contains('present')")
    assert page.evaluate(
        "[...document.querySelectorAll('.bs-side')].map((s) => s.querySelectorAll('.bs-fig .js-plotly-plot').length)"
    ) == [3, 3, 3, 3]
    page.keyboard.press("ArrowRight")
    page.wait_for_function("bsPlayer.state.drawn === 6")
    assert page.evaluate(SIDES) == expected(views, 6)
    left = page.evaluate(
        "[...document.querySelectorAll('.bs-side')].map((s) => Math.round(s.getBoundingClientRect().left))"
    )
    assert left == sorted(left) and len(set(left)) == 4  # one row of four columns at 1280 px
    page.close()
