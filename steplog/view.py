"""A read-only view of a trace for the visuals: per-step records plus per-request colours and derived cells.

The visuals index steps by position in the trace (0 .. ``num_steps`` - 1). That equals each record's ``step`` unless
the engine skipped idle steps (``idle_steps_before``: nothing to run until a later arrival); ``step_number(i)`` gives
the step clock's number of position ``i`` for labels.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, cast

from steplog.records import HeaderRecord, StepRecord, SummaryRecord

# Okabe & Ito (2008), "Color Universal Design": distinguishable with the common colour-vision deficiencies.
OKABE_ITO = ["#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7", "#000000"]
EXTRA = ["#8C564B", "#7F7F7F", "#BCBD22", "#17BECF", "#9467BD", "#AEC7E8", "#FFBB78", "#98DF8A"]
FREE_COLOR = "#E8E8E8"
PADDING_COLOR = "#9E9E9E"


@dataclass(frozen=True)
class Cell:
    """What one slot did in one step. ``kind``: prefill, recompute (a prefill redoing K/V a preemption dropped),
    decode, or padding (a finished member of a static batch)."""

    step: int
    slot: int
    request_id: str
    kind: str
    num_tokens: int = 0
    token_text: str = ""
    partial: bool = False  # the sampled token alone is part of a character (byte-level BPE)


@dataclass
class TraceView:
    """A trace's records split into header, steps and summary; ``source`` says where it came from (recorded, live,
    imported) and ``filename`` names an imported file."""

    records: list[Any]  # [HeaderRecord, StepRecord..., SummaryRecord], as ``steplog.trace.read`` returns them
    source: str = "recorded"
    filename: str = ""
    header: HeaderRecord = field(init=False)
    steps: list[StepRecord] = field(init=False)
    summary: SummaryRecord = field(init=False)

    def __post_init__(self):
        self.header = cast(HeaderRecord, self.records[0])
        self.steps = cast(list[StepRecord], self.records[1:-1])
        self.summary = cast(SummaryRecord, self.records[-1])

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
        out = []
        for i, st in enumerate(self.steps):
            sampled = {s["request_id"]: s for s in st["sampled"]}
            for s in st["scheduled"]:
                kind = "recompute" if s.get("recompute") else s["kind"]
                tok = sampled.get(s["request_id"])
                text, partial = (tok["text"], tok.get("partial", False)) if tok else ("", False)
                out.append(Cell(i, s["slot"], s["request_id"], kind, s["num_tokens"], text, partial))
            for p in st["padding_slots"]:
                out.append(Cell(i, p["slot"], p["request_id"], "padding"))
        return out

    def step_number(self, i: int) -> int:
        """The step clock's number of the step at position ``i`` (``i`` itself unless idle steps were skipped)."""
        return self.steps[i]["step"] if 0 <= i < len(self.steps) else i

    @cached_property
    def has_idle_gaps(self) -> bool:
        return any(st.get("idle_steps_before") for st in self.steps)

    @property
    def partial(self) -> bool:
        """The run was stopped early (cancelled): unfinished requests have no finish."""
        return bool(self.summary.get("partial"))

    def step_ticks(self, lo: int, hi: int, max_ticks: int = 12) -> dict:
        """x-axis ticks for positions ``lo..hi`` labelled with step numbers (``{}`` without idle gaps)."""
        if not self.has_idle_gaps:
            return {}
        every = max(1, -(-(hi - lo + 1) // max_ticks))
        vals = list(range(max(lo, 0), min(hi, len(self.steps) - 1) + 1, every))
        return {"tickvals": vals, "ticktext": [str(self.step_number(v)) for v in vals]}

    def finish_step(self, request_id: str) -> int | None:
        """Position of the step in which ``request_id`` finished (``None``: it did not)."""
        for i, st in enumerate(self.steps):
            if any(f["request_id"] == request_id for f in st["finished"]):
                return i
        return None

    def provenance(self) -> str:
        h = self.header
        created = (h.get("created") or "")[:10] or "unknown date"
        return f"{h['model']} · {h['device']} · {h['dtype']} · {created}"
