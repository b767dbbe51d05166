"""Odd URL parameters (shared case e12; issue 21, part 2): every value of ``?step=``, ``?speed=``, ``?present=`` and
``?policy=`` gives a working player. Out of range clamps, anything that is not a plain decimal number falls back to
the default, and the page never receives a non-finite number (the payload refuses one).

The rule is one function, ``batchscope.player.export.url_number`` (``url_step`` rounds it), which the app's pages use
and which the exported file's ``BS.urlNumber`` repeats with the same pattern; tests/ui/test_browser_url_params.py runs
the same tables in Chromium, in the file and in the app.
"""

from __future__ import annotations

import json
import re

import pytest
from appkit import page, player_payload
from conftest import ROOT

from batchscope.player.export import _URL_NUMBER, payload_json, read_payload, url_number, url_step

LAST = 21  # seed-abcd: static and continuous on one clock, 22 steps

# ?step= of the seed-abcd pair (default 0, steps 0..21): the case's values, and more of each kind
STEPS = {
    None: 0,
    "": 0,
    "0": 0,
    "7": 7,
    " 7": 7,
    "+5": 5,
    "2.6": 3,
    "2.5": 3,
    ".5": 1,
    "5.": 5,
    "1e1": 10,
    "-0": 0,
    "-1": 0,
    "999999": LAST,
    "3000000000": LAST,
    "4294967297": LAST,
    "1e400": LAST,
    "9" * 400: LAST,
    "abc": 0,
    "0x10": 0,
    "7abc": 0,
    "nan": 0,
    "NaN": 0,
    "inf": 0,
    "-inf": 0,
    "Infinity": 0,
    "1_0": 0,
    "\u0663": 0,
}
# ?speed= (default 8, range 1..120 steps/s)
SPEEDS = {
    None: 8,
    "4": 4,
    "2.5": 2.5,
    "0": 1,
    "-5": 1,
    "0.5": 1,
    "1e9": 120,
    "1e400": 120,
    "nan": 8,
    "inf": 8,
    "-inf": 8,
    "abc": 8,
    "": 8,
}


def test_the_step_parameter_clamps_or_falls_back_to_the_default():
    assert {text: url_step(text, 0, 0, LAST) for text in STEPS} == STEPS


def test_the_speed_parameter_clamps_or_falls_back_to_the_default():
    assert {text: url_number(text, 8, 1, 120) for text in SPEEDS} == SPEEDS


def test_a_default_outside_the_range_is_clamped_too():
    assert url_step(None, 50, 10, 20) == 20 and url_step("x", -3, 0, 5) == 0  # a span of steps: lo is not 0


def test_the_exported_player_reads_its_url_with_the_same_pattern():
    js = (ROOT / "batchscope" / "player" / "web" / "player.js").read_text(encoding="utf-8")
    (pattern,) = re.findall(r"/\^(.*?)\$/\.test\(text\)", js)
    assert pattern == _URL_NUMBER.pattern
    for name in ("payload.js", "views.js", "player.js"):  # no 32-bit truncation (`k | 0`: 4294967297 was step 1)
        code = re.sub(
            r"/\*.*?\*/|//[^\n]*",
            "",
            (ROOT / "batchscope" / "player" / "web" / name).read_text(encoding="utf-8"),
            flags=re.S,
        )
        assert not re.search(r"\|\s*0\b|~~|>>>?\s*0\b", code), name


def test_the_payload_refuses_a_non_finite_number():
    """``NaN`` in the page's JSON: Chromium's JSON.parse refuses the whole payload, and the player stays blank."""
    for bad in (float("nan"), float("inf"), -float("inf")):
        with pytest.raises(ValueError):
            payload_json({"speed": bad})
    assert payload_json({"speed": 8.0, "text": "</script>"}) == '{"speed":8.0,"text":"\\u003c/script>"}'


def strict(text: str) -> dict:
    def refuse(token: str):
        raise ValueError(f"{token} in the payload")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.app
@pytest.mark.parametrize(
    "query,step,speed",
    [
        ({"speed": "nan"}, 0, 8),  # the case: a blank player
        ({"speed": "inf", "step": "3000000000"}, LAST, 8),
        ({"speed": "-inf", "step": "4294967297"}, LAST, 8),
        ({"speed": "1e9", "step": "-1"}, 0, 120),
        ({"speed": "0", "step": "2.6"}, 3, 1),
        ({"speed": "abc", "step": "abc"}, 0, 8),
    ],
)
def test_the_app_gives_the_player_a_clamped_step_and_a_finite_speed(query, step, speed):
    at = page("page_lockstep", scenario="seed-abcd", **query)
    (frame,) = at.get("iframe")
    body = re.search(r'id="bs-payload">(.*?)</script>', frame.proto.srcdoc, re.DOTALL).group(1)
    visit = strict(body)  # this visit's own fields, in plain JSON over the packed trace
    assert (visit["initial_step"], visit["speed"], read_payload(frame.proto.srcdoc)["num_steps"]) == (
        step,
        speed,
        LAST + 1,
    )


@pytest.mark.app
def test_an_unknown_policy_or_present_value_opens_the_default_player():
    p = player_payload(page("page_walkthrough", policy="bogus", present="yes", step="1e400"))
    assert ([v["policy"] for v in p["views"]], p["present"], p["initial_step"]) == (["continuous"], False, 13)
