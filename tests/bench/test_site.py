"""``python -m batchscope site`` (issue 20, part 4): the static course site, opened from ``file://`` with every request
that is not a file refused (so a page that needed the network would fail here), clicked through: the index links
every shipped scenario, each player plays its pair with the scenario's tour, and each glossary "see it" link opens
its player at the step it names.
"""

from __future__ import annotations

import pytest
from clikit import assert_clear_error, cli

from batchscope.inputs.workload import list_scenarios

pytestmark = pytest.mark.app

READY = "window.bsPlayer && bsPlayer.state.drawn >= 0"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    code, _, err = cli("site", "--out", str(out), "--force", timeout=600)
    assert code == 0, err
    return out


@pytest.fixture
def offline_page(browser):
    """A page whose every request other than a ``file://`` one is refused and recorded."""
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    page.set_default_timeout(60_000)
    refused: list[str] = []
    page.route(
        "**/*",
        lambda r: r.continue_() if r.request.url.startswith("file://") else (refused.append(r.request.url), r.abort()),
    )
    yield page, refused
    page.close()


def test_the_index_links_every_scenario_and_each_player_plays_offline(site, offline_page):
    page, refused = offline_page
    page.goto((site / "index.html").as_uri())
    names = page.eval_on_selector_all(".card h2 a", "(els) => els.map((e) => e.textContent)")
    assert names == sorted(list_scenarios())
    for name in names:
        page.goto((site / "index.html").as_uri())
        page.click(f"text={name}")
        page.wait_for_function(READY)
        assert page.url.endswith(f"/{name}.html")
        # the scenarios made to set the engines apart play vLLM's and SGLang's pair, the speculative one vLLM with and
        # without drafts (both vLLM's continuous batching); every other one both batching modes
        pair = {"vllm-vs-sglang": ["continuous", "sglang"], "four-engines": ["continuous", "sglang"]}.get(
            name, ["continuous", "continuous"] if name == "spec-decode" else ["static", "continuous"]
        )
        assert page.evaluate("bsPlayer.sides.map((s) => s.v.policy)") == pair
        page.keyboard.press("PageDown")  # the scenario's tour: the first moment after step 0
        page.wait_for_function("document.getElementById('bs-moment').textContent.startsWith('★ Moment')")
    assert refused == []


def test_every_see_it_link_of_the_glossary_opens_its_step(site, offline_page):
    page, refused = offline_page
    page.goto((site / "glossary.html").as_uri())
    links = page.eval_on_selector_all(".see-it", "(els) => els.map((e) => [e.getAttribute('href'), e.textContent])")
    assert len(links) >= 15
    for href, text in dict(links).items():
        step = int(href.split("step=")[1])
        assert text.endswith(f"step {step}") and href.split(".html")[0] in text
        page.goto((site / "glossary.html").as_uri())
        page.click(f"a[href='{href}']")
        page.wait_for_function(f"window.bsPlayer && bsPlayer.state.drawn === {step}")
    page.goto((site / "index.html").as_uri())
    page.click("text=Glossary")
    assert page.url.endswith("/glossary.html")
    assert refused == []


def test_a_folder_with_files_is_kept_without_force(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    code, _, err = cli("site", "--out", str(tmp_path))
    assert_clear_error(code, err, "the folder is not empty; add --force")
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


def test_the_index_links_a_page_of_every_recorded_run_where_asked():
    """``site --all-runs``: a scenario recorded under static, continuous and sglang gets a card link to its page of
    all three; without the option, no such link."""
    from batchscope.tools.static_site import index_page, recorded_runs

    assert recorded_runs("seed-abcd") == ("static", "continuous", "sglang")
    assert recorded_runs("priority") == ("static", "continuous")  # SGLang's scheduler takes no priority queue
    # four engines: each engine's own scheduler before a variant of one of its settings (tgi_no_chunking, ...)
    assert recorded_runs("four-engines") == ("continuous", "sglang", "tgi", "trtllm")
    page = index_page({"seed-abcd": "four requests", "priority": "priorities"}, ["seed-abcd"])
    assert '<a href="seed-abcd-all.html">all 3 runs on one clock</a>' in page and "priority-all" not in page
    assert "-all.html" not in index_page({"seed-abcd": "four requests"})
