"""The app's pages with vLLM's scheduler and SGLang's (the shipped vllm-vs-sglang traces): Compare runs shows both
sides on one step clock and narrates each from its own decision records; the pair control switches between
static vs continuous and vLLM vs SGLang; the Walkthrough tells the story; the glossary links SGLang's terms.
Hand-known values: tests/visuals/test_vllm_vs_sglang.py (at step 3 SGLang runs C's 11-token prefill alone while A
and B wait, vLLM runs all three; B's prefix hit is 31 tokens in SGLang, 24 in vLLM)."""

from __future__ import annotations

import json

from appkit import page, player_payload
from conftest import RECORDED


def _narration(p: dict, side: int, k: int) -> str:
    return p["T"][p["views"][side]["steps"]["narration"][k]]


def test_compare_runs_puts_vllm_and_sglang_side_by_side():
    at = page("page_lockstep", scenario="vllm-vs-sglang", step="3")
    assert [s.value for s in at.selectbox][:2] == ["vllm-vs-sglang / continuous", "vllm-vs-sglang / sglang"]
    assert at.query_params["pair"] == "schedulers"
    assert " · continuous · " in at.caption[0].value and " · sglang · " in at.caption[1].value
    assert any("same KV pool of 216 token slots" in m.value for m in at.markdown)
    p = player_payload(at)
    assert [v["policy"] for v in p["views"]] == ["continuous", "sglang"] and p["initial_step"] == 3
    steps = [json.loads(x) for x in (RECORDED / "vllm-vs-sglang-sglang.jsonl").read_text().splitlines()[1:-1]]
    assert steps[3]["decisions"]["batch"]["decodes_waiting"] == ["A", "B"]  # what the page must say
    assert "The decodes of A and B wait this step" in _narration(p, 1, 3)
    assert "decode 1 token each; C is admitted" in _narration(p, 0, 3)  # vLLM: one forward for all three
    cards = {c["label"]: [p["T"][i] for i in c["values"]] for c in p["counters"]}
    assert cards["decodes waiting behind a prefill (SGLang)"][3].startswith("2 / ")
    assert cards["prefix-cache hit tokens (vLLM · SGLang)"][1] == "24 · 31"


def test_the_pair_control_switches_to_static_vs_continuous():
    at = page("page_lockstep", scenario="vllm-vs-sglang")
    at.segmented_control(key="lock:pair:vllm-vs-sglang").set_value("batching").run()
    assert not at.exception, at.exception
    assert [s.value for s in at.selectbox][:2] == ["vllm-vs-sglang / static", "vllm-vs-sglang / continuous"]
    assert [v["policy"] for v in player_payload(at)["views"]] == ["static", "continuous"]
    at = page("page_lockstep", scenario="seed-abcd", pair="schedulers")  # seed-abcd ships an SGLang trace too
    assert [v["policy"] for v in player_payload(at)["views"]] == ["continuous", "sglang"]


def test_the_walkthrough_tells_the_two_schedulers_story():
    at = page("page_walkthrough", story="vllm-vs-sglang")
    p = player_payload(at)
    (v,) = p["views"]
    assert v["policy"] == "sglang" and "The decodes of A and B wait this step" in _narration(p, 0, 3)
    assert any(m["step"] == 3 and "Prefill first" in m["note"] for m in p["tour"])
    at.segmented_control(key="walk:policy:vllm-vs-sglang").set_value("continuous").run()
    assert not at.exception, at.exception
    assert player_payload(at)["views"][0]["policy"] == "continuous"
    at = page("page_walkthrough")  # the default story is still the seed's
    assert player_payload(at)["views"][0]["num_steps"] == 14


def test_the_glossary_links_sglang_terms_to_their_steps():
    at = page("page_glossary")
    text = " ".join(m.value for m in at.markdown)
    for name in ("Radix cache (SGLang)", "Prefill first (SGLang)", "Retraction (SGLang)", "New-token ratio (SGLang)"):
        assert f"**{name}**" in text, name
    links = [b for b in at.get("page_link") if "vllm-vs-sglang (sglang), step 3" in str(b.proto)]
    assert links, "prefill first should link to step 3 of the SGLang trace"


def test_the_walkthrough_tells_how_much_each_engine_reserves():
    """The four-engines story opens on vLLM's run and plays each engine's run its toggle names, with its own words:
    TGI's whole-lifetime allocation in TGI's narration."""
    at = page("page_walkthrough", story="four-engines")
    assert player_payload(at)["views"][0]["policy"] == "continuous"
    at.segmented_control(key="walk:policy:four-engines").set_value("tgi").run()
    assert not at.exception, at.exception
    p = player_payload(at)
    assert p["views"][0]["policy"] == "tgi" and "whole lifetime" in _narration(p, 0, 0)
