"""Every shipped tour stops at each kind of event its traces hold, and every note says what its step's facts say
(issue 36, item 4).

Coverage: for each shipped trace, the scenario's tour resolved against that trace alone (as the Walkthrough and the
Trace page play it) has a stop at a step where each occurrence kind of the fact model happens
(``batchscope.facts.occurrences``: every late admission and every eviction by request, the other kinds once).

Notes: a note's claims are read here with this file's own phrase table, independent of the code that writes them,
and each is checked against the step's facts (``batchscope.facts.model``) and the raw step records; a note that
names a request in a phrase the table does not know fails, so a new note cannot slip past the check unread.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache

import pytest
from conftest import RECORDED_TRACES

from batchscope.explain.moments import tour_of
from batchscope.facts import facts
from batchscope.facts.occurrences import kinds_of
from batchscope.inputs.workload import list_scenarios, scenario_tour
from batchscope.steplog import trace
from batchscope.steplog.view import TraceView


@cache
def view_of(name: str) -> TraceView:
    return TraceView(trace.read(next(p for p in RECORDED_TRACES if p.stem == name)))


def scenario_of(name: str) -> str:
    return max((s for s in list_scenarios() if name.startswith(s + "-")), key=len)


def stops(name: str) -> dict[int, str]:
    view = view_of(name)
    return {m["step"]: m["note"] for m in tour_of([view], scenario_tour(scenario_of(name)) or [])}


# --- the phrase table: what a note claims, checked against the step ----------------------------------------------


def events(view: TraceView, k: int, kind: str) -> set[str]:
    return {e.request_id for e in facts(view).step(k).events if e.kind == kind}


def evicted_as(view: TraceView, k: int, word: str) -> set[str]:
    return {e.request_id for e in facts(view).step(k).events if e.kind == "evicted" and e.word == word}


def entry(view: TraceView, k: int, rid: str) -> dict | None:
    return next((s for s in view.steps[k]["scheduled"] if s["request_id"] == rid), None)


def work(view: TraceView, k: int, rid: str) -> str | None:
    s = entry(view, k, rid)
    return None if s is None else ("prefill" if s["kind"] == "prefill" else "decode")


def batch_rows(view: TraceView, k: int) -> set[str]:
    st = view.steps[k]
    return {s["request_id"] for s in st["scheduled"]} | {p["request_id"] for p in st["padding_slots"]}


Check = Callable[[TraceView, int, dict[str, list[str]], list[str]], str | None]


def claim(ok: bool, what: str) -> str | None:
    return None if ok else what


def first_chunk(v, k, who, n):
    rid = who["a"][0]
    s = entry(v, k, rid)
    prompt = v.request_info[rid]["num_prompt_tokens"]
    good = s is not None and s["kind"] == "prefill" and s["num_computed_tokens"] == 0 and s["num_tokens"] == int(n[1])
    return claim(good and int(n[0]) == prompt > int(n[1]), f"{rid}'s first chunk of {n[0]} tokens computes {n[1]}")


def prefix_hit(v, k, who, n):
    rid, cache_word = who["a"][0], "radix" if v.policy == "sglang" else "prefix"
    s = entry(v, k, rid)
    got = s is not None and s["num_computed_tokens"] == int(n[0]) and rid in events(v, k, "admitted")
    return claim(got and n[2] == cache_word, f"{rid} is admitted finding {n[0]} tokens in the {n[2]} cache")


def mixed(v, k, who, n):
    good = work(v, k, who["a"][0]) == "prefill" and all(work(v, k, r) == "decode" for r in who["b"])
    return claim(good, f"{who['a']} prefill beside the decodes of {who['b']}")


def finishes(v, k, who, n):
    return claim(set(who["a"]) <= events(v, k, "finished"), f"{who['a']} finish")


def batch_ends(v, k, who, n):
    done = set(v.finished_by(k))
    good = set(who["a"]) <= events(v, k, "finished") and batch_rows(v, k) <= done
    good = good and k + 1 < v.num_steps and set(who["b"]) <= events(v, k + 1, "admitted")
    return claim(good, f"{who['a']} finish last of the batch, {who['b']} are admitted at the next step")


def every_row_finishes(v, k, who, n):
    return claim(batch_rows(v, k) <= events(v, k, "finished"), "every request of the batch finishes here")


def next_step_admitted(v, k, who, n):
    return claim(k + 1 < v.num_steps and set(who["a"]) <= events(v, k + 1, "admitted"), f"{who['a']} next step")


def padding(v, k, who, n):
    rid = who["a"][0]
    good = rid in v.finished_by(k) and rid in {p["request_id"] for p in v.steps[k]["padding_slots"]}
    return claim(good, f"{rid} is a padding row")


def evicted(v, k, who, n):
    return claim(who["a"][0] in evicted_as(v, k, n[0]), f"{who['a'][0]} is {n[0]}")


def runs(v, k, who, n):
    return claim(all(entry(v, k, r) is not None for r in who["a"]), f"{who['a']} run in the step")


def readmitted(v, k, who, n):
    return claim(who["a"][0] in events(v, k, "readmitted"), f"{who['a'][0]} is admitted again")


def prefill_alone(v, k, who, n):
    state = facts(v).state(k)
    alone = all(work(v, k, r) == "prefill" for r in who["a"])
    wait = all(state[r] == "running" and entry(v, k, r) is None for r in who["b"])
    return claim(alone and wait, f"{who['a']} prefill while {who['b']} skip their decode")


def waits(v, k, who, n):
    return claim(all(r in v.steps[k]["waiting"] for r in who["a"]), f"{who['a']} wait")


def late(v, k, who, n):
    rid, j = who["a"][0], k - int(n[0])
    good = rid in events(v, k, "admitted") and j >= 0 and rid in v.steps[j]["waiting"]
    return claim(good, f"{rid} is admitted {n[0]} steps after it waited")


def admitted_with(v, k, who, n):
    rid = who["a"][0]
    good = rid in events(v, k, "admitted") and len(v.block_tables(k).get(rid, ())) == int(n[0])
    return claim(good, f"{rid} is admitted with {n[0]} blocks in its table")


def drafts(v, k, who, n):
    rid = who["a"][0]
    s = entry(v, k, rid) or {}
    sampled = sum(1 for x in v.steps[k]["sampled"] if x["request_id"] == rid)
    good = len(s.get("draft_token_ids", ())) == int(n[0]) and s.get("num_accepted_tokens") == int(n[1])
    return claim(good and sampled == int(n[2]), f"{rid} verifies {n[0]} drafts, keeps {n[1]}, samples {n[2]}")


def aborted(v, k, who, n):
    return claim(who["a"][0] in events(v, k, "aborted"), f"{who['a'][0]} is aborted")


def last_finish(v, k, who, n):
    good = k == v.num_steps - 1 and v.step_number(k) == int(n[0]) and bool(v.steps[k]["finished"])
    return claim(good, f"the last request finishes at step {n[0]}")


L, LIST = "{L}", "{LIST}"
PHRASES: list[tuple[str, Check]] = [
    (
        r"(?P<a>{L})'s prompt \((\d+) tokens\) does not fit one step's token budget: its first chunk computes (\d+)",
        first_chunk,
    ),
    (r"(?P<a>{L}) finds (\d+) of its (\d+) prompt tokens in the (prefix|radix) cache", prefix_hit),
    (r"One forward computes (?P<a>{L})'s prompt tokens and the next token of (?P<b>{LIST})", mixed),
    (
        r"(?P<a>{LIST}) finishes, the last of its batch: the batch ends here, and at the next step a new one starts: "
        r"(?P<b>{LIST}) (?:are|is) admitted",
        batch_ends,
    ),
    (r"(?P<a>{LIST}) finishes(?!, the last of its batch)", finishes),
    (r"Every running request finishes here", every_row_finishes),
    (r"at the (?:very )?next step (?P<a>{L}) takes its batch row", next_step_admitted),
    (r"at the next step only newly admitted ones run: (?P<a>{LIST})", next_step_admitted),
    (r"(?P<a>{L}) is done, yet its row stays in the batch as padding", padding),
    (r"(?P<a>{L}) is (preempted|retracted|paused)", evicted),
    (r"(?P<a>{L}) needed a KV block", runs),
    (r"(?P<a>{L}) is admitted again", readmitted),
    (r"runs the prefill batch of (?P<a>{LIST}) alone; the decodes? of (?P<b>{LIST}) waits? a step", prefill_alone),
    (r"prefills the new batch of (?P<a>{LIST}) alone: the decodes? of (?P<b>{LIST}) stalls? a step", prefill_alone),
    (r"(?P<a>{L}) waits(?! a step)", waits),
    (r"(?P<a>{L}) is admitted at last, (\d+) steps after it first waited", late),
    (r"(?P<a>{L}) is admitted (?:with|holding) (\d+) KV blocks", admitted_with),
    (
        r"(?P<a>{L}) verifies (\d+) draft tokens (?:in one forward )?and keeps (?:all )?(\d+)[^;]*?[:;] (\d+) tokens? "
        r"in",
        drafts,
    ),
    (r"(?P<a>{L}) is aborted", aborted),
    (r"finishes its last request at step (\d+)", last_finish),
]


def note_problems(view: TraceView, k: int, note: str) -> list[str]:
    """What is wrong with ``note`` at step position ``k`` of ``view``: each phrase whose claim the step's facts
    contradict, and each request the note names outside any phrase of the table."""
    labels = sorted({view.label(r) for r in view.request_ids}, key=len, reverse=True)
    one = r"\b(?:" + "|".join(re.escape(x) for x in labels) + r")\b"
    many = rf"{one}(?:, {one})*(?: and {one})?"
    by_label = {view.label(r): r for r in view.request_ids}
    problems, covered = [], []
    for pattern, check in PHRASES:
        for m in re.finditer(pattern.replace(L, one).replace(LIST, many), note):
            who = {
                g: [by_label[x] for x in re.findall(one, m.group(g) or "")] for g in ("a", "b") if g in m.groupdict()
            }
            numbers = [x for i, x in enumerate(m.groups(), 1) if i not in {m.re.groupindex.get(g) for g in who}]
            wrong = check(view, k, who, numbers)
            if wrong:
                problems.append(f"step {k}: the note says {wrong!r}, the facts do not: {note!r}")
            covered.append(m.span())
    for m in re.finditer(one, note):
        if not any(a <= m.start() < b for a, b in covered):
            problems.append(f"step {k}: the note names {m.group()} in a phrase this test cannot check: {note!r}")
    return problems


# --- the tests -------------------------------------------------------------------------------------------------------

NAMES = [p.stem for p in RECORDED_TRACES]


@pytest.mark.parametrize("name", NAMES)
def test_the_tour_stops_at_each_kind_of_event_the_trace_holds(name):
    view = view_of(name)
    tour = stops(name)
    missing = [
        f"{kind}{f' of {rid}' if rid else ''} (at steps {steps[:6]}{'...' if len(steps) > 6 else ''})"
        for (kind, rid), steps in kinds_of(facts(view)).items()
        if not set(steps) & set(tour)
    ]
    assert not missing, f"{name}: the tour has no stop at {', '.join(missing)}; its stops: {sorted(tour)}"


@pytest.mark.parametrize("name", NAMES)
def test_every_note_of_the_tour_says_what_its_step_holds(name):
    view = view_of(name)
    problems = [p for k, note in stops(name).items() for p in note_problems(view, k, note)]
    assert not problems, "\n".join(problems)


def test_the_note_check_catches_a_wrong_request_a_wrong_event_and_an_unread_phrase():
    """The check can fail: the old ``sixteen`` static note at step 399 (only S01 finished there: S02-S04 were padding
    rows that finished long before), a preemption named on the wrong request, and a request named in a phrase the
    table does not know."""
    static = view_of("sixteen-static")
    old = "Every running request finishes here; at the next step only newly admitted ones run: S05, S06, S07, S08."
    assert any("every request of the batch finishes here" in p for p in note_problems(static, 399, old))
    vllm = view_of("vllm-vs-sglang-continuous")
    assert note_problems(vllm, 30, "D is preempted: A needed a KV block and none was free.") == []
    assert any("'C is preempted'" in p for p in note_problems(vllm, 30, "C is preempted: A needed a KV block."))
    assert any("'D is retracted'" in p for p in note_problems(vllm, 30, "D is retracted."))
    assert any("cannot check" in p for p in note_problems(vllm, 30, "D is preempted because C grows."))


def test_the_coverage_check_sees_a_missing_stop():
    """vLLM's preemption of C at step 48 of vllm-vs-sglang is an occurrence of its own (issue 36): a tour that
    stops only at D's preemption (step 30) misses it."""
    found = kinds_of(facts(view_of("vllm-vs-sglang-continuous")))
    assert found[("preemption", "C")] == [48] and found[("preemption", "D")] == [30]
    assert ("late_admission", "D") not in found  # vLLM admits D the step it arrives (6); SGLang holds it back
    assert kinds_of(facts(view_of("vllm-vs-sglang-sglang")))[("late_admission", "D")] == [66]
