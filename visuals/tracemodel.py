"""A read-only view of a trace for the visuals: per-step records plus per-request colours and derived cells."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

# Okabe & Ito (2008), "Color Universal Design": distinguishable with the common colour-vision deficiencies.
OKABE_ITO = ["#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7", "#000000"]
EXTRA = ["#8C564B", "#7F7F7F", "#BCBD22", "#17BECF", "#9467BD", "#AEC7E8", "#FFBB78", "#98DF8A"]
FREE_COLOR = "#E8E8E8"
PADDING_COLOR = "#9E9E9E"


def text_color(hex_color: str) -> str:
    """Black or white, whichever reads better on ``hex_color`` (for a request's chip)."""
    r, g, b = (int(hex_color[i : i + 2], 16) for i in (1, 3, 5))
    return "#000" if 0.299 * r + 0.587 * g + 0.114 * b > 140 else "#fff"


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


@dataclass
class TraceView:
    records: list[dict]
    header: dict = field(init=False)
    steps: list[dict] = field(init=False)
    summary: dict = field(init=False)

    def __post_init__(self):
        self.header, self.steps, self.summary = self.records[0], self.records[1:-1], self.records[-1]

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
        """Every (step, slot) that was not empty."""
        out = []
        for st in self.steps:
            texts = {s["request_id"]: s["text"] for s in st["sampled"]}
            busy = set()
            for s in st["scheduled"]:
                kind = "recompute" if s.get("recompute") else s["kind"]
                out.append(Cell(st["step"], s["slot"], s["request_id"], kind, s["num_tokens"],
                                texts.get(s["request_id"], "")))
                busy.add(s["slot"])
            for p in st["padding_slots"]:
                out.append(Cell(st["step"], p["slot"], p["request_id"], "padding"))
                busy.add(p["slot"])
        return out

    def finish_step(self, request_id: str) -> int | None:
        for st in self.steps:
            if any(f["request_id"] == request_id for f in st["finished"]):
                return st["step"]
        return None

    def provenance(self) -> str:
        h = self.header
        created = (h.get("created") or "")[:10] or "unknown date"
        return f"{h['model']} · {h['device']} · {h['dtype']} · {created}"
