"""Every shipped pair of runs is two clicks away on the Compare runs page: its scenario, then its pair (issue 36,
item 5). Before: the scenario was only a URL parameter and the pair sat in a popover (about 7 clicks and a URL edit
for vLLM vs SGLang).

The reference is the folder of shipped traces, read here: every run a scenario ships (``SCENARIO-RUN.jsonl``) is
played by some option of its Pair picker, each option plays runs the scenario ships, and each side's caption names
its run (a speculative run is not titled "continuous").
"""

from __future__ import annotations

import pytest
from appkit import page, player_payload
from conftest import RECORDED

from batchscope.app.page_lockstep import PAIR_NAMES
from batchscope.inputs.workload import list_scenarios

pytestmark = pytest.mark.app


def shipped_runs(scenario: str) -> set[str]:
    """The runs of ``scenario`` in the traces folder (``SCENARIO-RUN.jsonl``)."""
    others = [s for s in list_scenarios() if s != scenario and s.startswith(scenario + "-")]
    stems = [p.stem for p in RECORDED.glob(f"{scenario}-*.jsonl") if not any(p.stem.startswith(o) for o in others)]
    return {stem[len(scenario) + 1 :] for stem in stems}


def click(at, key: str, value: str):
    at.segmented_control(key=key).set_value(value).run()
    assert not at.exception, at.exception
    return at


def labels(at, key: str) -> list[str]:
    return [o.content for o in at.segmented_control(key=key).proto.options]


def played(at) -> list[str]:
    """The run name each side of the player shows (its caption starts with it)."""
    return [v["caption"].split(" · ")[0] for v in player_payload(at)["views"]]


@pytest.mark.parametrize("scenario", sorted(list_scenarios()))
def test_every_run_a_scenario_ships_is_two_clicks_away(scenario):
    runs = shipped_runs(scenario)
    at = click(page("page_lockstep"), "lock:scenario", scenario)  # click 1
    assert scenario in labels(at, "lock:scenario")
    names = {name: value for value, name in PAIR_NAMES.items()}
    reached: set[str] = set()
    for label in labels(at, f"lock:pair:{scenario}"):
        after = click(click(page("page_lockstep"), "lock:scenario", scenario), f"lock:pair:{scenario}", names[label])
        sides = played(after)  # click 2
        assert len(sides) >= 2 and len(set(sides)) == len(sides) and set(sides) <= runs, (scenario, label, sides)
        reached |= set(sides)
    assert reached == runs, (scenario, sorted(runs - reached))


def test_the_pair_a_scenario_opens_on_is_one_click_away():
    """vLLM vs SGLang: one click on its scenario (it opens on its own pair)."""
    at = click(page("page_lockstep"), "lock:scenario", "vllm-vs-sglang")
    assert played(at) == ["continuous", "sglang"]
    at = click(page("page_lockstep"), "lock:scenario", "spec-decode")
    assert played(click(at, "lock:pair:spec-decode", "speculative")) == ["continuous", "speculative"]
