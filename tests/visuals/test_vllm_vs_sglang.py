"""vLLM's scheduler and SGLang's on one workload (the shipped vllm-vs-sglang traces): what the side-by-side pages
say each scheduler decided, checked against the raw trace lines and the scenario's story worked by hand.

The story (batchscope/inputs/scenarios/vllm-vs-sglang.json; prompts of 44, 42, 43 and 28 tokens, 32-token budget, a pool
of 27 blocks of 8 = 216 token slots): A's prompt takes two chunks and B joins the second at step 1, finding the story
opening in the cache: 31 tokens in SGLang's radix cache, 24 (3 whole blocks) in vLLM's. C arrives at step 3: SGLang
runs its 11-token prefill alone while A and B wait; vLLM computes C's prefill with their decodes. D arrives at step 6:
SGLang holds it (its 28 prompt + 40 output tokens + 1 = 69 do not fit the 18 tokens its estimate leaves), vLLM
admits it and later preempts it. SGLang retracts C when the decode batch outgrows the pool, and C comes back with
its whole 43-token prompt found in the radix cache.
"""

from __future__ import annotations

import json

from conftest import RECORDED, step_records

from batchscope.compare.lockstep import family_counters
from batchscope.compare.runs import family_pair
from batchscope.explain.moments import tour_for
from batchscope.explain.narration import narrate
from batchscope.quiz.deck import questions
from batchscope.steplog import trace
from batchscope.steplog.metrics import summarize
from batchscope.steplog.view import TraceView
from batchscope.tools.html_export import player_page

NAME = "vllm-vs-sglang"


def raw(policy: str) -> list[dict]:
    return [json.loads(x) for x in (RECORDED / f"{NAME}-{policy}.jsonl").read_text().splitlines() if x.strip()]


def view(policy: str) -> TraceView:
    return TraceView(trace.read(RECORDED / f"{NAME}-{policy}.jsonl"))


def rows(step: dict) -> list[tuple[str, str, int]]:
    return [(s["request_id"], s["kind"], s["num_tokens"]) for s in step["scheduled"]]


def test_the_story_holds_in_the_raw_lines():
    sgl, vll = step_records(raw("sglang")), step_records(raw("continuous"))
    assert sgl[1]["num_prefix_hit_tokens"]["B"] == 31 and vll[1]["num_prefix_hit_tokens"]["B"] == 24
    assert rows(sgl[3]) == [("C", "prefill", 11)]  # prefill first: A and B do not run
    assert rows(vll[3]) == [("A", "decode", 1), ("B", "decode", 1), ("C", "prefill", 11)]
    assert "D" in sgl[6]["waiting"] and "D" in vll[6]["admitted"]
    head = sgl[6]["decisions"]["head"]
    assert (head["limit"], head["need"], head["left"]) == ("sglang_reserved_output", 28 + 40 + 1, 18)
    assert "D" in {p for st in vll for p in st["preempted"]}
    retracted = [(k, p) for k, st in enumerate(sgl) for p in st["preempted"]]
    assert [p for _, p in retracted] == ["C"]
    back = next(k for k in range(retracted[0][0] + 1, len(sgl)) if "C" in sgl[k]["admitted"])
    assert sgl[back]["num_prefix_hit_tokens"]["C"] == 43  # its whole prompt stayed in the radix cache


def _hits(steps: list[dict]) -> tuple[int, int]:
    """Prompt tokens found in the prefix cache at first admissions, and at re-admissions after an eviction."""
    first = again = 0
    evicted: set[str] = set()
    for st in steps:
        for rid, n in st["num_prefix_hit_tokens"].items():
            if rid in evicted:
                again += n
            else:
                first += n
        evicted |= set(st["preempted"])
    return first, again


def test_counters_count_what_the_lines_show():
    """Issue 32: the counters count what Metrics counts (the head's waits: every step it waited, with those for its
    output estimate apart; prefix-cache hits at first admissions, re-admissions apart), and steps on one clock."""
    sgl, vll = step_records(raw("sglang")), step_records(raw("continuous"))
    waited = sum(len(set(st["running"]) - {s["request_id"] for s in st["scheduled"]}) for st in sgl)
    held = sum(1 for st in sgl if st["waiting"])
    estimate = sum(
        1 for st in sgl if st["waiting"] and not st["admitted"] and "sglang_reserved_output" in json.dumps(st)
    )
    assert (held, estimate) == (61, 2)  # D waits 60 steps, B one
    (hits_v, again_v), (hits_s, again_s) = _hits(vll), _hits(sgl)
    assert (hits_v, hits_s) == (summarize(view("continuous").records)["prefix_cache_hits"], 63)
    pre = sum(len(st["preempted"]) for st in vll)
    cards = {c["label"]: c["values"] for c in family_counters(view("continuous"), view("sglang"))}
    assert cards["decodes waiting behind a prefill (SGLang)"][3] == "2 / " + str(waited)  # A and B at step 3
    assert cards["decodes waiting behind a prefill (SGLang)"][-1] == f"{waited} / {waited}"
    assert cards["steps the head waits (SGLang) · for its output estimate"][-1] == f"{held} · {estimate}"
    assert cards["preemptions (vLLM) · retractions (SGLang)"][-1] == f"{pre} · 1"
    assert cards["prefix-cache hit tokens (vLLM · SGLang)"][1] == "24 · 31"
    assert (
        cards["prefix-cache hit tokens (vLLM · SGLang)"][-1]
        == f"{hits_v} · {hits_s} (re-admissions {again_v} · {again_s})"
    )
    assert cards["vLLM steps"][0] == str(vll[-1]["step"] + 1) and cards["SGLang steps"][0] == str(sgl[-1]["step"] + 1)


def test_each_side_is_narrated_from_its_own_records():
    sgl, vll = view("sglang"), view("continuous")
    assert family_pair(vll, sgl) and family_pair(sgl, vll) and not family_pair(view("static"), vll)
    s3, v3 = narrate(sgl, 3), narrate(vll, 3)
    assert "The decodes of A and B wait this step: SGLang runs a prefill batch alone" in s3
    assert "SGLang's admission reserves 60 output tokens for C" in s3  # C's max_tokens, min(60, 4096)
    assert "wait this step" not in v3 and v3.startswith("Step 3: A and B decode 1 token each; C is admitted")
    assert "its 31 cached tokens are a token-by-token match in SGLang's radix cache" in narrate(sgl, 1)
    assert "needs 69 tokens, 18 left" in narrate(sgl, 6)
    k = next(k for k, st in enumerate(sgl.steps) if st["preempted"])
    assert "C is retracted: the pool could not hold the decode batch" in narrate(sgl, k)


def test_the_tour_shows_each_difference_on_its_side():
    notes = {m["step"]: m["note"] for m in tour_for([view("continuous"), view("sglang")], None)}
    assert "SGLang: Prefill first: SGLang runs the prefill batch of C alone" in notes[3]
    assert notes[6].startswith("SGLang: D waits: the pool cannot hold its prompt plus its whole output budget")


def test_sglang_quiz_questions_answer_from_the_lines():
    sgl = view("sglang")
    q3 = {q.kind: q for q in questions(sgl, 3, seed=0)}
    assert q3["batch_kind"].value == "prefill alone" and q3["reserved_output"].value == 60
    q6 = {q.kind: q for q in questions(sgl, 6, seed=0)}
    assert q6["batch_kind"].value == "decodes only"
    assert q6["admitted"].value == (None, "sglang_reserved_output")


def test_the_exported_pair_carries_both_schedulers_and_their_counters():
    paths = [str(RECORDED / f"{NAME}-{p}.jsonl") for p in ("continuous", "sglang")]
    html, num_steps, _ = player_page(paths)
    assert num_steps == len(raw("sglang")) - 2  # SGLang's run is the longer one here
    assert "decodes waiting behind a prefill (SGLang)" in html
    assert "The decodes of A and B wait this step" in html


def test_an_sglang_side_is_headed_sglang_and_its_comeback_moment_names_the_radix_cache():
    """The player capitalises a side's heading ("continuous" -> "Continuous"): SGLang's read "Sglang". And the tour's
    comeback note of an SGLang trace said its hits were found "in the prefix cache" (vLLM's); SGLang's is a radix
    cache. The hit count is the comeback admission's own record."""
    from batchscope.player.playback import player_payload, side_labels

    vl, sg = view("continuous"), view("sglang")
    assert side_labels([vl, sg]) == ["vLLM (continuous)", "SGLang"]  # beside another engine: vLLM by name
    assert side_labels([vl]) == ["continuous"]
    assert side_labels([sg, sg]) == ["A · SGLang", "B · SGLang"]
    assert [v["label"] for v in player_payload([sg], "x")["views"]] == ["SGLang"]
    for v, cache in ((sg, "radix cache"), (vl, "prefix cache")):
        notes = [m["note"] for m in tour_for([v], None) if "admitted again" in m["note"]]
        hits = [
            a["num_prefix_hit_tokens"]
            for k in range(v.num_steps)
            for a in v.steps[k].get("decisions", {}).get("admissions", [])
            if a["resumed"] and a["num_recompute_tokens"] and a["num_prefix_hit_tokens"]
        ]
        assert hits and all(f"({h} found in the {cache})" in " ".join(notes) for h in hits), (notes, hits)
