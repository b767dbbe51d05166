"""A read-only view of a trace for the visuals: per-step records plus per-request colours and derived cells.

The visuals index steps by their place on the step clock (0 .. ``num_steps`` - 1). The engine writes no record for
an idle step (nothing to run until a later arrival: the next record's ``idle_steps_before`` counts them); the view
puts each back as a step of its own (``on_the_clock``: nothing scheduled, the pool as the step before left it,
``"idle": true``), so that a position is a step of the clock in every view, and two runs of one workload stand on
the same clock side by side. ``step_number(i)`` gives the clock's number of position ``i`` (``i`` itself, unless the
trace starts later: a server trace cut to a window).
"""

from __future__ import annotations

import bisect
import math
import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, cast

from batchscope.steplog.blocks import BlockTables, Tables
from batchscope.steplog.cutshort import cut_short_note
from batchscope.steplog.records import HeaderRecord, RequestSpecRecord, ScheduledRecord, StepRecord, SummaryRecord
from batchscope.steplog.spec_decode import num_drafts

# Okabe & Ito (2008), "Color Universal Design": distinguishable with the common colour-vision deficiencies.
OKABE_ITO = ["#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7", "#000000"]
EXTRA = ["#8C564B", "#7F7F7F", "#BCBD22", "#17BECF", "#9467BD", "#AEC7E8", "#FFBB78", "#98DF8A"]
CHILD_PREFIX = re.compile(r"\d+_(?=.{9})")  # vLLM's n > 1 children: "{i}_" + the parent's id
FREE_COLOR = "#E8E8E8"
PADDING_COLOR = "#9E9E9E"


# The most idle steps a view puts back one by one: past it (an arrival at step 10**9), each run of idle steps is one
# record covering the run (``idle_steps``), so that a view's memory follows the trace, not the clock's numbers.
MAX_IDLE_RECORDS = 100_000


def on_the_clock(steps: list[StepRecord], version: int = 1) -> list[StepRecord]:
    """``steps`` with the idle steps the engine skipped (``idle_steps_before``: nothing to run until a later arrival)
    put back as records of their own, ``{"type": "step", "step": n, "idle": True, "idle_steps": 1}``: nothing
    scheduled, sampled or queued, no duration (``t_start == t_end``, the previous step's end). Nothing runs or waits
    in an idle step, so no request holds a block (``num_used_blocks`` 0; in a version 1 trace ``block_tables`` is
    empty, in version 2 ``freed`` names the tables the next record frees) and nothing is decided
    (``batchscope.steplog.decisions``); what the pool's cache holds then is not recorded and is left out. Past
    ``MAX_IDLE_RECORDS`` skipped steps in all, each run is one record with ``idle_steps`` = its length. Returns
    ``steps`` itself when nothing was skipped; ``version``: the trace's schema version."""
    skipped = [int(st.get("idle_steps_before", 0) or 0) for st in steps]
    if not any(skipped):
        return steps
    one_by_one = sum(skipped) <= MAX_IDLE_RECORDS
    out: list[StepRecord] = []
    for st, gap in zip(steps, skipped):
        if gap:
            t = out[-1]["t_end"] if out else st["t_start"]
            kv: dict[str, Any] = {"num_blocks": st["kv"]["num_blocks"], "block_size": st["kv"]["block_size"]}
            kv["num_used_blocks"] = 0
            if version == 1:
                kv["block_tables"] = {}
            else:
                kv["freed"] = list(st["kv"].get("freed", []))
            runs = [(n, 1) for n in range(st["step"] - gap, st["step"])] if one_by_one else [(st["step"] - gap, gap)]
            for n, length in runs:
                idle: dict[str, Any] = {"type": "step", "step": n, "t_start": t, "t_end": t, "scheduled": []}
                idle |= {"num_batched_tokens": 0, "sampled": [], "admitted": [], "finished": [], "preempted": []}
                idle |= {"waiting": [], "running": [], "padding_slots": [], "kv": dict(kv)}
                idle |= {"idle": True, "idle_steps": length}
                if "num_prefix_hit_tokens" in st:  # nobody is admitted in an idle step
                    idle["num_prefix_hit_tokens"] = {}
                out.append(cast(StepRecord, idle))
        out.append(st)
    return out


def text_color(hex_color: str) -> str:
    """Black or white, whichever reads better on ``hex_color`` (for a request's chip)."""
    r, g, b = (int(hex_color[i : i + 2], 16) for i in (1, 3, 5))
    return "#000" if 0.299 * r + 0.587 * g + 0.114 * b > 140 else "#fff"


@dataclass(frozen=True)
class Cell:
    """What one slot did in one step. ``kind``: prefill, recompute (a prefill redoing K/V a preemption dropped),
    decode, speculative (a decode verifying draft tokens), or padding (a finished member of a static batch)."""

    step: int
    slot: int
    request_id: str
    kind: str
    num_tokens: int = 0
    token_text: str = ""
    partial: bool = False  # the sampled token alone is part of a character (byte-level BPE)


def _cell_kind(s: ScheduledRecord) -> str:
    """A scheduled entry's cell kind: ``recompute``, ``speculative`` (a decode verifying drafts), or its ``kind``."""
    if s.get("recompute"):
        return "recompute"
    return "speculative" if s["kind"] == "decode" and num_drafts(s) else s["kind"]


@dataclass
class TraceView:
    """A trace's records split into header, steps and summary; ``source`` says where it came from (recorded, live,
    imported) and ``filename`` names an imported file; ``engine`` which engine wrote it (the header's ``source``).

    ``header["requests"]`` also lists the requests that a version 2 trace declares in its steps (``arrived``: a
    server cannot list them up front), so the visuals see every request in arrival order."""

    # [HeaderRecord, StepRecord..., SummaryRecord], as ``batchscope.steplog.trace.read`` returns them
    records: list[Any]
    source: str = "recorded"
    filename: str = ""
    header: HeaderRecord = field(init=False)
    steps: list[StepRecord] = field(init=False)
    recorded_steps: list[StepRecord] = field(init=False)
    summary: SummaryRecord = field(init=False)
    _cells: dict[int, list[Cell]] = field(init=False, default_factory=dict, repr=False)
    memo: dict = field(init=False, default_factory=dict, repr=False)  # whole-trace facts the visuals derive once

    def __post_init__(self):
        self.header = cast(HeaderRecord, self.records[0])
        self.recorded_steps = cast(list[StepRecord], self.records[1:-1])  # as the engine wrote them
        # every step of the clock, idle ones included
        self.steps = on_the_clock(self.recorded_steps, self.header.get("schema_version", 1))
        self.summary = cast(SummaryRecord, self.records[-1])
        requests = declared_requests(self.header, self.steps)
        if requests is not self.header["requests"]:
            self.header = {**self.header, "requests": requests}

    @property
    def engine(self) -> str:
        return self.header.get("source", "batchscope")

    @cached_property
    def _tables(self) -> BlockTables:
        return BlockTables(self.steps, self.header.get("schema_version", 1))

    def block_tables(self, step: int) -> Tables:
        """``{request_id: block ids}`` during ``step``'s forward pass (rebuilt from deltas in version 2 traces)."""
        return self._tables(step)

    @cached_property
    def block_counts(self) -> dict[str, dict[int, int]]:
        """``{request_id: {step: blocks held}}`` over the whole trace."""
        return self._tables.counts()

    @cached_property
    def labels(self) -> dict[str, str]:
        """A short display name per request: the id itself if short, else the part after the prefix every id shares
        (``chatcmpl-``), cut to 8 characters (longer where two would collide). An ``n > 1`` child of a vLLM request
        (``0_chatcmpl-…``) keeps its index in front (``0_…3a9e2b7d``)."""
        ids = self.request_ids
        if all(len(r) <= 10 for r in ids):
            return {r: r for r in ids}
        child = {r: m.group(0) if (m := CHILD_PREFIX.match(r)) else "" for r in ids}
        bare = [r[len(child[r]) :] for r in ids]
        prefix = _common_prefix(bare) if len(ids) > 1 else ""
        rest = {r: b[len(prefix) :] or b for r, b in zip(ids, bare, strict=True)}
        for width in (8, 12, 16):
            for short in (
                {r: child[r] + s[:width] + ("…" if len(s) > width else "") for r, s in rest.items()},
                {r: child[r] + ("…" if len(s) > width else "") + s[-width:] for r, s in rest.items()},
            ):
                if len(set(short.values())) == len(ids):
                    return short
        return {r: r for r in ids}

    def label(self, request_id: str) -> str:
        return self.labels.get(request_id, request_id)

    @property
    def num_steps(self) -> int:
        return len(self.steps)

    @property
    def policy(self) -> str:
        return self.header["policy"]

    @cached_property
    def request_ids(self) -> list[str]:
        return [r["request_id"] for r in self.header["requests"]]

    @cached_property
    def colors(self) -> dict[str, str]:
        """One colour per request, in header order (the same ids get the same colours in every trace)."""
        palette = OKABE_ITO + EXTRA
        return {rid: palette[i % len(palette)] for i, rid in enumerate(self.request_ids)}

    @cached_property
    def cells(self) -> list[Cell]:
        """Every (step position, slot) that was not empty."""
        return [c for k in range(len(self.steps)) for c in self.cells_at(k)]

    def cells_at(self, k: int) -> list[Cell]:
        """The non-empty (step position, slot) cells of step index ``k``, built on first use (a window of a long
        trace never builds the others). ``partial``: the token sampled there is only part of a character."""
        if k not in self._cells:
            st = self.steps[k]
            sampled = {s["request_id"]: s for s in st["sampled"]}
            texts: dict[str, str] = {}  # a speculative step yields several tokens: all of them
            for x in st["sampled"]:
                texts[x["request_id"]] = texts.get(x["request_id"], "") + x.get("text", "")
            out = [
                Cell(
                    k,
                    s["slot"],
                    s["request_id"],
                    _cell_kind(s),
                    s["num_tokens"],
                    texts.get(s["request_id"], ""),
                    bool(sampled[s["request_id"]].get("partial")) if s["request_id"] in sampled else False,
                )
                for s in st["scheduled"]
            ]
            out += [Cell(k, p["slot"], p["request_id"], "padding") for p in st["padding_slots"]]
            self._cells[k] = out
        return self._cells[k]

    @cached_property
    def first_seen(self) -> dict[str, int]:
        """The first step each request is waiting, running, finished or preempted in (it had arrived by then)."""
        out: dict[str, int] = {}
        for k, st in enumerate(self.steps):
            for key in ("waiting", "running", "preempted"):
                for rid in st[key]:
                    out.setdefault(rid, k)
            for f in st["finished"]:
                out.setdefault(f["request_id"], k)
        return out

    def step_number(self, i: int) -> int:
        """The step clock's number of the step at position ``i`` (``i`` itself unless the trace starts later)."""
        return self.steps[i]["step"] if 0 <= i < len(self.steps) else i

    @cached_property
    def has_idle_gaps(self) -> bool:
        """The engine skipped idle steps (``idle_steps_before``), which the view put back on the clock."""
        return any(st.get("idle") for st in self.steps)

    @cached_property
    def _numbers_differ(self) -> bool:
        return any(st["step"] != i for i, st in enumerate(self.steps))

    @property
    def partial(self) -> bool:
        """The run was stopped early (cancelled): unfinished requests have no finish."""
        return bool(self.summary.get("partial"))

    @property
    def cut_short(self) -> str | None:
        """What to say of a trace whose steps stop early (cut short: no summary line, the server did not shut down;
        or truncated by the tracer's size cap), ``None`` if complete
        (``batchscope.steplog.cutshort.cut_short_note``)."""
        return cut_short_note(self.summary)

    def step_ticks(self, lo: int, hi: int, max_ticks: int = 12) -> dict:
        """x-axis ticks for positions ``lo..hi`` labelled with step numbers (``{}`` without idle gaps)."""
        if not self._numbers_differ:
            return {}
        every = max(1, -(-(hi - lo + 1) // max_ticks))
        vals = list(range(max(lo, 0), min(hi, len(self.steps) - 1) + 1, every))
        return {"tickvals": vals, "ticktext": [str(self.step_number(v)) for v in vals]}

    # Indexes built once per trace, so that per-step questions cost O(answer), not O(steps): a busy server's trace has
    # thousands of steps and requests, and the player asks every question at every step.

    @cached_property
    def _finishes(self) -> tuple[list[str], list[int], dict[str, int]]:
        """(request ids in finishing order, count finished by the end of each step, first finishing step of each)."""
        flat: list[str] = []
        ends: list[int] = []
        at: dict[str, int] = {}
        for k, st in enumerate(self.steps):
            for f in st["finished"]:
                flat.append(f["request_id"])
                at.setdefault(f["request_id"], k)
            ends.append(len(flat))
        return flat, ends, at

    def finished_by(self, step: int) -> list[str]:
        """Requests finished by the end of ``step`` (position), in finishing order."""
        flat, ends, _ = self._finishes
        return flat[: ends[step]] if step >= 0 else []

    def finish_step(self, request_id: str) -> int | None:
        """Position of the step in which ``request_id`` finished (``None``: it did not)."""
        return self._finishes[2].get(request_id)

    @cached_property
    def _sampled_at(self) -> dict[str, list[int]]:
        """Per request, the positions of the steps it sampled a token in (ascending)."""
        out: dict[str, list[int]] = {}
        for k, st in enumerate(self.steps):
            for s in st["sampled"]:
                out.setdefault(s["request_id"], []).append(k)
        return out

    def num_sampled_before(self, request_id: str, step: int) -> int:
        """Output tokens ``request_id`` sampled in the steps before position ``step``."""
        return bisect.bisect_left(self._sampled_at.get(request_id, []), step)

    @cached_property
    def request_info(self) -> dict[str, RequestSpecRecord]:
        """The header's entry of each request (prompt, ``num_prompt_tokens``, ``max_tokens``...), by id."""
        return {r["request_id"]: r for r in self.header["requests"]}

    @cached_property
    def _arrivals(self) -> tuple[list[str], list[float], dict[str, int] | None]:
        """(request ids by first step seen, then header order; those steps, never-seen last; each id's header
        position, or None when the two orders agree)."""
        pos = {r: i for i, r in enumerate(self.request_ids)}
        ids = sorted(self.request_ids, key=lambda r: (self.first_seen.get(r, math.inf), pos[r]))
        return ids, [self.first_seen.get(r, math.inf) for r in ids], None if ids == self.request_ids else pos

    def not_arrived(self, step: int) -> list[str]:
        """Requests not yet seen in any queue by position ``step`` (first seen later, or never), in header order."""
        ids, seen_at, pos = self._arrivals
        later = ids[bisect.bisect_right(seen_at, step) :]
        return later if pos is None else sorted(later, key=pos.__getitem__)

    def provenance(self) -> str:
        h = self.header
        created = (h.get("created") or "")[:10] or "unknown date"
        device = f"{h['device']} ({h['device_name']})" if h.get("device_name") else h["device"]
        if self.engine == "vllm":
            return f"vLLM {h.get('vllm_version', '?')} server, {h['model']}, {device} · {h['dtype']} · {created}"
        if self.engine == "sglang":
            return f"SGLang {h.get('sglang_version', '?')} server, {h['model']}, {device} · {h['dtype']} · {created}"
        return f"{h['model']} · {device} · {h['dtype']} · {created}"


def declared_requests(header: Any, steps: list[Any]) -> list[Any]:
    """Every request of a trace: the header's, then those a version 2 trace declares in its steps (``arrived``), in
    arrival order. The one list every reader of requests uses (``TraceView.header["requests"]``, the metrics): a
    server's header lists none. The header's own list (the same object) when the steps declare none."""
    known = {r["request_id"] for r in header["requests"]}  # a view of a view's header lists them already
    arrived = [r for st in steps for r in st.get("arrived", ()) if r["request_id"] not in known]
    return [*header["requests"], *arrived] if arrived else header["requests"]


def _common_prefix(ids: list[str]) -> str:
    """The longest prefix all ``ids`` share, cut back to its last separator (``chatcmpl-``, never ``chatcmpl-3``)."""
    lo, hi = min(ids), max(ids)
    n = 0
    while n < min(len(lo), len(hi)) and lo[n] == hi[n]:
        n += 1
    return lo[: max(lo.rfind(c, 0, n) for c in "-_:./") + 1]
