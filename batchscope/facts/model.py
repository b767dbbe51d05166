"""One set of facts per step of a trace, computed once and read by every view (issue 32).

``facts(view)`` returns the ``Facts`` of a ``TraceView``, built on first use and kept in ``view.memo``. Each step of
the clock (``TraceView.steps``: idle steps included) has a ``StepFacts``: every request's state and work in it, the
step's events in its engine's own words (``batchscope.facts.vocabulary``), what the pool gave back and who took it
at once, and the run's counters up to the end of the step, with the definitions ``batchscope.steplog.metrics``
uses. The counters are built in one pass over the trace; a step's other facts on the first question about it (a
player asks about every step, a window of a 5,000-step server trace about a few).

Facts a trace cannot tell are ``None`` (a server trace without draft ids has no rejected drafts to count), never
guessed; where ``batchscope.steplog`` infers a record (decisions, drafts) it says so (``inferred``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from batchscope.facts.blocks import given_back, handed_on, releases
from batchscope.facts.vocabulary import (
    ABORTED,
    CUT_SHORT,
    FINISHED,
    IDLE,
    NOT_ARRIVED,
    RUNNING,
    WAITING,
    Eviction,
    eviction,
    family,
)
from batchscope.steplog.decisions import decisions
from batchscope.steplog.spec_decode import num_drafts
from batchscope.steplog.view import TraceView

ESTIMATE_LIMIT = "sglang_reserved_output"  # SGLang's head held by its reserved output estimate (PrefillAdder)


@dataclass(frozen=True, slots=True)
class Counters:
    """The run's counters up to the end of one step (cumulative), each as ``batchscope.steplog.metrics.summarize``
    defines the figure of the same name.

    ``num_steps``: steps of the clock so far, idle ones included (Metrics' ``num_steps`` at the last step).
    ``num_evictions``: preemptions (vLLM) or retractions (SGLang) (Metrics' ``num_preemptions``).
    ``prefix_cache_hits`` / ``preempted_prefix_cache_hits``: prompt tokens found in the prefix cache at first
    admissions / at re-admissions after an eviction (Metrics' figures of those names, vLLM's ``PrefixCacheStats``).
    ``head_wait_steps``: steps that ended with a request waiting at the head of the queue (a decision record's
    ``head``); ``estimate_wait_steps``: those where what held it was SGLang's reserved output estimate.
    ``decodes_waiting``: decode rows that skipped a step behind a prefill batch (SGLang's EXTEND alone).
    ``padding_slot_steps``: rows a static batch ran for finished members (Metrics' figure).
    ``num_finished`` / ``num_aborted``: requests that ended with a finish / an abort (Metrics').
    ``output_tokens``: tokens sampled."""

    num_steps: int = 0
    num_evictions: int = 0
    prefix_cache_hits: int = 0
    preempted_prefix_cache_hits: int = 0
    head_wait_steps: int = 0
    estimate_wait_steps: int = 0
    decodes_waiting: int = 0
    padding_slot_steps: int = 0
    num_finished: int = 0
    num_aborted: int = 0
    output_tokens: int = 0


@dataclass(frozen=True, slots=True)
class RequestFacts:
    """One request in one step. ``state``: not arrived, waiting, running, the family's eviction word (preempted,
    retracted: sent back in this step), finished or aborted (by the end of this step, or before), or "" where the
    step lists it nowhere. ``work``: what it computed in the step (prefill, recompute, decode, speculative, padding;
    ``None``: nothing); ``num_tokens``: tokens it computed (a speculative decode: 1 + its drafts); ``chunk``: which
    chunk of its prompt a prefill is (1, 2, ...; counted since its last admission); ``num_drafts``: draft tokens it
    verified, ``num_accepted``: of them, those verification kept (``None`` where the trace does not say),
    ``drafts_inferred``: the draft figures are the reader's inference (a server trace without draft ids,
    ``batchscope.steplog.spec_decode``); ``num_sampled``: tokens it sampled; ``num_blocks``: KV blocks (token slots)
    it held in the step's forward pass; ``finish_reason``: how it ended, in or before this step (``None``: it has
    not); ``abort_state``: for an abort, what it was doing (waiting, running, preempted; ``None`` where the trace
    does not record it)."""

    request_id: str
    state: str
    work: str | None = None
    num_tokens: int = 0
    chunk: int | None = None
    num_drafts: int = 0
    num_accepted: int | None = None
    drafts_inferred: bool = False
    num_sampled: int = 0
    num_blocks: int = 0
    finish_reason: str | None = None
    abort_state: str | None = None


@dataclass(frozen=True, slots=True)
class Event:
    """Something that happened to one request in a step: ``kind`` admitted, readmitted, evicted, finished or
    aborted; ``word``: the engine's own word for it (``preempted``, ``retracted``, ``aborted``...)."""

    kind: str
    request_id: str
    word: str


@dataclass(frozen=True, slots=True)
class PoolFacts:
    """The KV pool in one step, in the trace's unit (blocks; token slots for SGLang): ``num_blocks``,
    ``num_used`` (held during the forward pass), ``freed`` (given back in or around the step: what finishes,
    aborts and evictions release, each block once; of a retraction, what SGLang's radix tree does not keep),
    ``handed_on`` (``{freed from: {taken by: blocks}}``: blocks an eviction or abort freed that another request
    took in the same step), ``given_back`` (block -> the request an eviction took it from: what the block map marks
    ⟲, ``batchscope.facts.blocks.given_back``)."""

    num_blocks: int
    num_used: int
    freed: int
    handed_on: dict[str, dict[str, list[int]]]
    given_back: dict[int, str]


@dataclass(frozen=True, slots=True)
class StepFacts:
    """Everything a view shows of one step of the clock. ``position``: its index in ``TraceView.steps``;
    ``number``: its number on the clock; ``idle``: nothing ran (``idle_steps`` steps of the clock in one record);
    the request lists (``waiting`` in queue order, ``running`` in batch order, ``evicted`` in this step,
    ``finished`` and ``aborted`` by its end, in ending order, ``not_arrived``); ``events`` in the engine's words;
    ``counters`` up to its end. Each request's own facts: ``Facts.requests``; the pool's: ``Facts.pool`` (built
    apart: a busy server's trace has thousands of requests, and most views need neither at every step)."""

    position: int
    number: int
    idle: bool
    idle_steps: int
    waiting: tuple[str, ...]
    running: tuple[str, ...]
    evicted: tuple[str, ...]
    finished: tuple[str, ...]
    aborted: tuple[str, ...]
    not_arrived: tuple[str, ...]
    events: tuple[Event, ...]
    counters: Counters


class Facts:
    """The facts of one trace: ``family`` (``vllm``, ``sglang``, ``tgi``, ``trtllm``), ``words`` (its ``Eviction``
    words), ``num_steps`` (the clock's length: Metrics' ``num_steps``), ``counters`` (one per step position), and per
    step position ``k``, each built on first use: ``step(k)`` (``StepFacts``), ``requests(k)`` (every request's
    ``RequestFacts``, in the trace's order) and ``pool(k)`` (``PoolFacts``). ``totals``: the counters of the
    run."""

    def __init__(self, view: TraceView):
        self.view = view
        self.family = family(view.header)
        self.words: Eviction = eviction(view.header)
        self.counters = _counters(view)
        self._chunks = _chunks(view)
        self._reasons = {f["request_id"]: f["reason"] for st in view.steps for f in st["finished"]}
        self._abort_states = {
            f["request_id"]: f["aborted"]["state"] for st in view.steps for f in st["finished"] if f.get("aborted")
        }
        self.cut_short = view.cut_short  # what to say of a trace whose steps stop early, None if complete
        self.step = lru_cache(maxsize=4096)(self._step)
        self.requests = lru_cache(maxsize=64)(self._requests)
        self.pool = lru_cache(maxsize=256)(self._pool)

    @property
    def num_steps(self) -> int:
        return self.counters[-1].num_steps if self.counters else 0

    @property
    def totals(self) -> Counters:
        return self.counters[-1] if self.counters else Counters()

    def end_word(self, request_id: str) -> str | None:
        """``finished`` or ``aborted`` for a request that ended in the trace; ``cut short`` for one still in flight
        when a cut-short trace stops (``TraceView.cut_short``); ``None`` for one a complete trace leaves unended
        (a cancelled run's)."""
        reason = self._reasons.get(request_id)
        if reason is None:
            return CUT_SHORT if self.cut_short else None
        return ABORTED if reason == "abort" else FINISHED

    def _step(self, k: int) -> StepFacts:
        view, st = self.view, self.view.steps[k]
        ended = view.finished_by(k)
        return StepFacts(
            k,
            int(st["step"]),
            bool(st.get("idle")),
            int(st.get("idle_steps", 1)),
            tuple(st["waiting"]),
            tuple(st["running"]),
            tuple(st["preempted"]),
            tuple(r for r in ended if self._reasons[r] != "abort"),
            tuple(r for r in ended if self._reasons[r] == "abort"),
            tuple(view.not_arrived(k)),
            self._events(k),
            self.counters[k],
        )

    def state(self, k: int) -> dict[str, str]:
        """Each request's state at step position ``k`` (``RequestFacts.state``), in the trace's order."""
        f, view = self.step(k), self.view
        state = dict.fromkeys(f.not_arrived, NOT_ARRIVED)
        state |= dict.fromkeys(f.waiting, WAITING) | dict.fromkeys(f.running, RUNNING)
        state |= dict.fromkeys(f.evicted, self.words.past)
        state |= dict.fromkeys(f.finished, FINISHED) | dict.fromkeys(f.aborted, ABORTED)
        return {rid: state.get(rid, IDLE) for rid in view.request_ids}

    def _requests(self, k: int) -> dict[str, RequestFacts]:
        view, st = self.view, self.view.steps[k]
        state = self.state(k)
        drafts = {s["request_id"]: num_drafts(s) for s in st["scheduled"]}
        entry = {s["request_id"]: s for s in st["scheduled"]}
        sampled: dict[str, int] = {}
        for s in st["sampled"]:
            sampled[s["request_id"]] = sampled.get(s["request_id"], 0) + 1
        blocks = {rid: len(t) for rid, t in view.block_tables(k).items()}
        work = {c.request_id: c for c in view.cells_at(k)}
        return {
            rid: RequestFacts(
                rid,
                state[rid],
                work[rid].kind if rid in work else None,
                work[rid].num_tokens if rid in work else 0,
                self._chunks.get((k, rid)),
                drafts.get(rid, 0),
                entry[rid].get("num_accepted_tokens") if rid in entry else None,
                bool(entry[rid].get("drafts_inferred")) if rid in entry else False,
                sampled.get(rid, 0),
                blocks.get(rid, 0),
                self._reasons.get(rid) if state[rid] in (FINISHED, ABORTED) else None,
                self._abort_states.get(rid) if state[rid] == ABORTED else None,
            )
            for rid in view.request_ids
        }

    def _events(self, k: int) -> tuple[Event, ...]:
        st = self.view.steps[k]
        resumed = {a["request_id"] for a in decisions(self.view, k).get("admissions", []) if a["resumed"]}
        out = [Event("readmitted" if r in resumed else "admitted", r, "admitted") for r in st["admitted"]]
        out += [Event("evicted", r, self.words.past) for r in st["preempted"]]
        for f in st["finished"]:
            abort = f["reason"] == "abort"
            out.append(Event("aborted" if abort else "finished", f["request_id"], ABORTED if abort else FINISHED))
        return tuple(out)

    def _pool(self, k: int) -> PoolFacts:
        view, kv = self.view, self.view.steps[k]["kv"]
        back = given_back(view, k)
        ended = sum(r.alone + r.shared for r in releases(view, k).values())
        return PoolFacts(int(kv["num_blocks"]), int(kv["num_used_blocks"]), ended + len(back), handed_on(view, k), back)


def facts(view: TraceView) -> Facts:
    """The ``Facts`` of ``view``, built once per view (kept in ``view.memo``)."""
    if "facts" not in view.memo:
        view.memo["facts"] = Facts(view)
    return view.memo["facts"]


def _counters(view: TraceView) -> list[Counters]:
    """The cumulative ``Counters`` at the end of each step position, in one pass."""
    out: list[Counters] = []
    c: dict[str, Any] = dict.fromkeys(Counters.__dataclass_fields__, 0)
    for k, st in enumerate(view.steps):
        d = decisions(view, k)
        c["num_steps"] = int(st["step"]) + int(st.get("idle_steps", 1) if st.get("idle") else 1)
        c["num_evictions"] += len(st["preempted"])
        for a in d.get("admissions", []):
            c["preempted_prefix_cache_hits" if a["resumed"] else "prefix_cache_hits"] += a["num_prefix_hit_tokens"]
        head = d.get("head")
        c["head_wait_steps"] += head is not None
        c["estimate_wait_steps"] += head is not None and head.get("limit") == ESTIMATE_LIMIT
        c["decodes_waiting"] += len(d.get("batch", {}).get("decodes_waiting", []))
        c["padding_slot_steps"] += len(st["padding_slots"])
        reasons = [f["reason"] for f in st["finished"]]
        c["num_aborted"] += reasons.count("abort")
        c["num_finished"] += len(reasons) - reasons.count("abort")
        c["output_tokens"] += len(st["sampled"])
        out.append(Counters(**c))
    return out


def _chunks(view: TraceView) -> dict[tuple[int, str], int]:
    """``{(position, request): chunk number}`` of every prefill (and recompute) entry, counted from 1 since the
    request's last admission."""
    out: dict[tuple[int, str], int] = {}
    count: dict[str, int] = {}
    for k, st in enumerate(view.steps):
        for rid in st["admitted"]:
            count[rid] = 0
        for s in st["scheduled"]:
            if s["kind"] == "prefill":
                count[s["request_id"]] = count.get(s["request_id"], 0) + 1
                out[(k, s["request_id"])] = count[s["request_id"]]
    return out
