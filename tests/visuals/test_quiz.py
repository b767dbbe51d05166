"""The quiz: every kind's answer is recomputed here from the raw step records (not with the quiz's own helpers), on
every step of every shipped trace; wrong options are never also right; questions are deterministic."""

from __future__ import annotations

import copy
import subprocess
import sys
from collections import Counter

import pytest
from conftest import RECORDED_TRACES, ROOT, step_records

from batchscope.quiz.deck import question, questions, random_step
from batchscope.steplog import trace
from batchscope.steplog.view import TraceView


def on_the_clock(recorded: list[dict], cfg: dict) -> list[dict]:
    """The steps indexed by step number: each step the engine skipped (nothing to run) as an empty record."""
    by_number = {st["step"]: st for st in recorded}
    kv = {"block_tables": {}, "num_cached_tokens": {}, "num_used_blocks": 0, "num_blocks": cfg["num_kv_blocks"]}
    empty = {"scheduled": [], "sampled": [], "waiting": [], "running": [], "preempted": [], "admitted": []}
    empty |= {"finished": [], "padding_slots": [], "num_batched_tokens": 0, "kv": kv}
    return [by_number.get(n, {**empty, "step": n}) for n in range(recorded[-1]["step"] + 1)]


class Raw:
    """Independent facts from the records: a second reading of docs/trace-format.md."""

    def __init__(self, records: list[dict]):
        self.header, self.summary = records[0], records[-1]
        self.cfg = self.header["config"]
        self.steps = on_the_clock(step_records(records), self.cfg)
        reqs = self.header["requests"]
        self.prompt = {r["request_id"]: r["num_prompt_tokens"] for r in reqs}
        self.max_tokens = {r["request_id"]: r["max_tokens"] for r in reqs}
        self.rank = {r["request_id"]: (r.get("priority", 0), i) for i, r in enumerate(reqs)}  # (priority, arrival)
        self.first_seen: dict[str, int] = {}
        self.token_steps: dict[str, list[int]] = {}
        self.outputs: dict[str, list[int]] = {}
        for k, st in enumerate(self.steps):  # by the step clock, as the quiz counts steps
            for rid in [s["request_id"] for s in st["scheduled"]] + st["admitted"] + st["waiting"] + st["preempted"]:
                self.first_seen.setdefault(rid, k)
            for s in st["sampled"]:
                self.token_steps.setdefault(s["request_id"], []).append(k)
                self.outputs.setdefault(s["request_id"], []).append(s["token_id"])

    def queue_at_start(self, k: int) -> list[str]:
        """Simulated: the previous step's waiting queue (in its recorded order), then this step's newcomers in
        header (arrival) order; under the priority policy the queue is ordered by (priority, arrival)."""
        prev = self.steps[k - 1]["waiting"] if k else []
        new = [r for r in self.prompt if self.first_seen.get(r) == k and r not in prev]
        queue = list(prev) + new
        if self.cfg.get("scheduling_policy") == "priority":
            queue.sort(key=self.rank.__getitem__)
        return queue

    def known(self, k: int, rid: str) -> int:
        return self.prompt[rid] + sum(1 for j in self.token_steps.get(rid, []) if j < k)

    def tokens(self, k: int, rid: str) -> list[int]:
        """The token ids ``rid`` knows when step k starts: its prompt, then its outputs sampled so far."""
        req = next(r for r in self.header["requests"] if r["request_id"] == rid)
        return list(req["prompt_token_ids"]) + self.outputs.get(rid, [])[: self.known(k, rid) - self.prompt[rid]]

    def cache(self, k: int) -> dict[tuple, list[int]]:
        """The prefix cache after step k was scheduled: each full block of K/V keyed by the tokens from position 0
        to its end (what a chained hash stands for), oldest block first; evicted blocks leave it."""
        bs, content, cache = self.cfg["block_size"], {}, {}
        for pos, st in enumerate(self.steps[: k + 1]):
            for b in st["kv"].get("evicted", []):  # (a block cached by work cancelled in its step was never hit)
                if b in content:
                    cache[content.pop(b)].remove(b)
            order = [s["request_id"] for s in st["scheduled"]]
            for rid in sorted(st["kv"]["block_tables"], key=lambda r: order.index(r) if r in order else len(order)):
                toks, full = self.tokens(pos, rid), st["kv"]["num_cached_tokens"][rid] // bs
                for i, b in enumerate(st["kv"]["block_tables"][rid][:full]):
                    if b not in content:
                        content[b] = tuple(toks[: (i + 1) * bs])
                        cache.setdefault(content[b], []).append(b)
        return cache

    def kv_need(self, k: int, rid: str, left: int) -> int:
        """Free blocks admitting ``rid`` at step k takes: blocks for its whole known sequence (full-prompt rule)
        or its first chunk, less the prefix-cache hit's blocks, plus the hit blocks that are now free."""
        bs, known, toks, cache = self.cfg["block_size"], self.known(k, rid), self.tokens(k, rid), self.cache(k)
        hits: list[int] = []
        for i in range((known - 1) // bs):
            if not cache.get(tuple(toks[: (i + 1) * bs])):
                break
            hits.append(cache[tuple(toks[: (i + 1) * bs])][0])
        hit = len(hits) * bs
        target = known if self.cfg.get("reserve_full_prompt") else hit + min(known - hit, max(left, 1))
        held = {b for t in self.steps[k]["kv"]["block_tables"].values() for b in t}
        return max(0, -(-target // bs) - len(hits)) + sum(b not in held for b in hits)

    def binding(self, k: int, limit: str) -> bool:
        """Whether ``limit`` holds the head back at step k, by the scheduler's rules (continuous batching)."""
        st = self.steps[k]
        left = self.cfg["max_num_batched_tokens"] - st["num_batched_tokens"]
        head = self.queue_at_start(k)[0]
        if limit == "preempted_this_step" and self.header["policy"] == "sglang":
            return head in st["preempted"]  # SGLang tries its prefill before the decode that retracts: the head was
        if limit == "preempted_this_step":  # retracted in this step, after any admission was tried
            return bool(st["preempted"])
        if limit == "max_num_seqs":
            return len(st["running"]) >= self.cfg["max_num_seqs"]
        if limit == "token_budget":
            return left <= 0
        if limit in ("kv_blocks", "kv_blocks_full_prompt"):
            return self.kv_need(k, head, left) > st["kv"]["num_blocks"] - st["kv"]["num_used_blocks"]
        if limit == "tgi_kv_blocks_lifetime":  # TGI's free list, from the pool: usable blocks (block 0 is TGI's own)
            kv, head_rec = st["kv"], st["decisions"]["head"]  # less those in tables and those the cache holds
            free = kv["num_blocks"] - 1 - kv["num_used_blocks"] - len(kv["cached_free_blocks"])
            spec = next(r for r in self.header["requests"] if r["request_id"] == head)
            lifetime = -(-(spec["num_prompt_tokens"] + spec["max_tokens"] - 1) // self.cfg["block_size"])
            if "need" not in head_rec:  # a radix allocation that failed: TGI reclaimed first, so the need was above
                return lifetime > free  # the free list whatever the cached prefix
            return head_rec["left"] <= free and head_rec["need"] <= lifetime and head_rec["need"] > free
        if limit.startswith(("sglang_", "tgi_", "trtllm_")):  # the other families' limits: their own references check
            head = st["decisions"]["head"]  # these traces' schedules; here: the record names it, its numbers show it
            return head["limit"] == limit and not st["admitted"] and head.get("need", 1) >= head.get("left", 0)
        return limit == "static_batch_running" and self.header["policy"] == "static"

    def expected(self, q) -> object:
        """The right answer of question ``q``, recomputed from the records."""
        k, st, rid = q.step, self.steps[q.step], q.subject
        tables = st["kv"]["block_tables"]
        done = [f["request_id"] for f in st["finished"]]
        if q.kind == "admitted":
            return tuple(st["admitted"]) if st["admitted"] else (None, q.value[1])  # the limit: checked apart
        if q.kind == "num_tokens":
            return next(s["num_tokens"] for s in st["scheduled"] if s["request_id"] == rid)
        if q.kind == "kv_blocks":
            return len({b for r, t in tables.items() if r not in done for b in t})
        if q.kind == "samples":
            return any(s["request_id"] == rid for s in st["sampled"])
        if q.kind == "preempted":
            return tuple(st["preempted"])
        if q.kind == "recompute":
            return self.tokens_since_admission(k, rid)
        if q.kind == "finished":  # a shared block is freed only when its last holder releases it
            refs = {int(b): n for b, n in st["kv"].get("ref_counts", {}).items()}
            mine = Counter(b for r in done for b in tables[r])
            return tuple(done), sum(1 for b, n in mine.items() if n == refs.get(b, 1))
        if q.kind == "queue_order":
            return tuple(self.queue_at_start(k))
        if q.kind == "unused_budget":
            return self.cfg["max_num_batched_tokens"] - sum(s["num_tokens"] for s in st["scheduled"])
        if q.kind == "lifetime_blocks":  # TGI: prompt + max_tokens - 1 tokens of blocks, cached ones included
            return -(-(self.prompt[rid] + self.max_tokens[rid] - 1) // self.cfg["block_size"])
        if q.kind in ("batch_kind", "tgi_batch"):  # SGLang's and TGI's: what the step's rows are
            kinds = {s["kind"] for s in st["scheduled"]}
            if kinds == {"prefill"}:
                return "prefill alone"
            return "decodes only" if kinds == {"decode"} else "prefill and decodes together"
        if q.kind == "reserved_output":  # SGLang charges min(max_tokens, 4096) when the last chunk is in this step
            s = next(s for s in st["scheduled"] if s["request_id"] == rid)
            known = self.prompt[rid] + sum(1 for j in self.token_steps.get(rid, []) if j < k)
            return min(self.max_tokens[rid], 4096) if s["num_computed_tokens"] + s["num_tokens"] == known else 0
        if q.kind == "padding":
            return len(st["padding_slots"])
        if q.kind == "prefix_hit":
            return st["num_prefix_hit_tokens"][rid]
        if q.kind == "kv_memory":  # SmolLM2-135M-Instruct's config.json, float32: K and V × 30 × 3 KV heads × 64 × 4
            assert (self.header["model"], self.header["dtype"]) == ("SmolLM2-135M-Instruct", "float32")
            return st["kv"]["num_used_blocks"] * st["kv"]["block_size"] * 2 * 30 * 3 * 64 * 4
        if q.kind == "fragmentation":  # the slots of the blocks held, less those holding K/V
            bs = st["kv"]["block_size"]
            return sum(len(t) * bs - st["kv"]["num_cached_tokens"][r] for r, t in tables.items())
        ts, arrival = self.token_steps[rid], self.first_seen[rid]
        if q.kind == "ttft":
            return ts[0] + 1 - arrival
        if q.kind == "e2e":
            return ts[-1] + 1 - arrival
        if q.kind == "tpot":
            return (ts[-1] - ts[0]) / (len(ts) - 1)
        raise AssertionError(f"no independent check for {q.kind}")

    def tokens_since_admission(self, k: int, rid: str) -> int:
        """Tokens ``rid`` computed from its last admission up to step k - 1 (what a preemption at k drops)."""
        total = 0
        for st in self.steps[:k]:
            if rid in st["admitted"]:  # what it found in the prefix cache it holds K/V for too
                total = st.get("num_prefix_hit_tokens", {}).get(rid, 0)
            total += sum(s["num_tokens"] for s in st["scheduled"] if s["request_id"] == rid)
        return total


@pytest.fixture(scope="module", params=RECORDED_TRACES, ids=[p.stem for p in RECORDED_TRACES])
def generated(request):
    records = trace.read(request.param)
    view = TraceView(records)
    return request.param.stem, Raw(records), [q for k in range(view.num_steps) for q in questions(view, k, seed=7)]


def test_every_answer_matches_the_records_and_no_wrong_option_is_right(generated):
    _, raw, qs = generated
    for q in qs:
        want = raw.expected(q)
        where = f"step {q.step} {q.kind} {q.subject}"
        if q.is_numeric:
            assert q.value == pytest.approx(want), where
            assert q.is_right(want) and not q.is_right(float(want) + 1), where
            continue
        assert q.value == want, where
        right = [c for c in q.choices if c.value == want]
        assert len(right) == 1 and q.answer_label == right[0].label, where
        assert len({c.label for c in q.choices}) == len(q.choices) >= 2, where
        for c in q.choices:
            assert q.is_right(c.label) == (c.value == want), where


def test_admissions_follow_the_queue_and_the_stated_limit_is_the_binding_one(generated):
    _, raw, qs = generated
    for q in (q for q in qs if q.kind == "admitted"):
        queue = raw.queue_at_start(q.step)
        assert queue, q.step
        if q.value[0] is not None:
            assert list(q.value) == queue[: len(q.value)], q.step  # a prefix of the queue, in its policy's order
            continue
        assert raw.binding(q.step, q.value[1]), (q.step, q.value)
        for c in q.choices:
            if c.value != q.value and c.value[0] is None:
                assert not raw.binding(q.step, c.value[1]), (q.step, c.label)


def test_recompute_answers_add_up_to_the_summary(generated):
    _, raw, qs = generated
    lost = Counter()
    for q in (q for q in qs if q.kind == "recompute"):
        lost[q.subject] += q.value
    for r in raw.summary["requests"]:
        if r["num_preemptions"]:  # the K/V lost, not what is computed again (the prefix cache may give some back)
            assert lost[r["request_id"]] == r["num_dropped_tokens"] >= r["num_recomputed_tokens"]


def test_at_least_eight_kinds_across_the_shipped_scenarios():
    kinds = Counter()
    for path in RECORDED_TRACES:
        view = TraceView(trace.read(path))
        for k in range(0, view.num_steps, 1 if view.num_steps < 100 else 7):
            kinds.update(q.kind for q in questions(view, k))
    expected = {"admitted", "num_tokens", "kv_blocks", "samples", "preempted", "recompute", "finished"}
    expected |= {"unused_budget", "padding", "ttft", "tpot", "e2e", "prefix_hit", "queue_order"}
    expected |= {"kv_memory", "fragmentation", "lifetime_blocks", "tgi_batch"}
    assert expected <= set(kinds), kinds


def test_prefix_cache_and_priority_questions_come_from_the_traces_that_show_them():
    asked = {}
    for path in RECORDED_TRACES:
        view = TraceView(trace.read(path))
        qs = [q for k in range(view.num_steps) for q in questions(view, k)]
        asked[path.stem] = {q.kind for q in qs if q.kind in ("prefix_hit", "queue_order")}
        hits = [q.value for q in qs if q.kind == "prefix_hit"]
        recorded = any(n > 0 for st in step_records(view.records) for n in st.get("num_prefix_hit_tokens", {}).values())
        assert not recorded or max(hits) > 0, path.stem  # a trace that records hits asks about a real one
    assert "prefix_hit" in asked["shared-prefix-continuous"] and "prefix_hit" in asked["sixteen-static"]
    assert "queue_order" in asked["priority-continuous"] and "queue_order" in asked["priority-static"]
    assert not any("queue_order" in kinds for name, kinds in asked.items() if not name.startswith("priority"))


def test_prefix_cache_questions_appear_when_the_trace_records_hits():
    records = copy.deepcopy(trace.read(RECORDED_TRACES[0].parent / "seed-abcd-continuous.jsonl"))
    for st in step_records(records):
        st["num_prefix_hit_tokens"] = {r: (8 if r == "A" else 0) for r in st["admitted"]}
    view, raw = TraceView(records), Raw(records)
    qs = [q for k in range(view.num_steps) for q in questions(view, k, seed=3) if q.kind == "prefix_hit"]
    assert [(q.step, q.subject) for q in qs] == [(0, "A"), (3, "D")]  # a positive hit is asked about first
    for q in qs:
        assert q.value == raw.expected(q) and sum(c.value == q.value for c in q.choices) == 1


def test_questions_are_deterministic_and_seeds_vary_them():
    path = RECORDED_TRACES[0].parent / "sixteen-continuous.jsonl"
    a, b = TraceView(trace.read(path)), TraceView(trace.read(path))
    for seed in (0, 1, "x"):
        k = random_step(a, seed)
        assert k == random_step(b, seed)
        assert question(a, k, seed) == question(b, k, seed)
    picked = {question(a, 3, seed).kind for seed in range(30)}
    assert len(picked) >= 3


def test_show_me_opens_the_page_the_trace_belongs_to():
    seed = TraceView(trace.read(RECORDED_TRACES[0].parent / "seed-abcd-static.jsonl"))
    assert question(seed, 4, 0).target.url == "/walkthrough?policy=static&step=4"
    pre = TraceView(trace.read(RECORDED_TRACES[0].parent / "preemption-continuous.jsonl"))
    assert question(pre, 27, 0, "preempted").target.url == "/trace?scenario=preemption&policy=continuous&step=27"
    pre.source = "live"
    assert question(pre, 27, 0).target.url == "/trace?live=continuous&step=27"
    pre.source = "imported"
    assert question(pre, 27, 0).target.page == ""


def test_a_kind_that_does_not_apply_is_not_generated():
    view = TraceView(trace.read(RECORDED_TRACES[0].parent / "seed-abcd-continuous.jsonl"))
    assert question(view, 5, 0, "preempted") is None  # nobody is preempted in seed-abcd
    assert question(view, 5, 0, "padding") is None  # continuous batching has no padding rows
    assert question(view, 5, 0, "admitted") is None  # nobody is waiting at step 5


def test_quiz_glossary_and_compare_logic_load_without_torch():
    code = (
        "import sys, batchscope.quiz.deck, batchscope.quiz.kinds, batchscope.glossary.entries, "
        "batchscope.compare.runs; "
        "print(sorted(m for m in ('torch', 'transformers', 'streamlit') if m in sys.modules))"
    )
    root = ROOT
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
