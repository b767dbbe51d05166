"""What one step of one trace shows: narration, slots, token budget, KV block map, queues, text so far."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from batchscope.app.common import chips, md
from batchscope.explain.beats import BEAT_TEXT, story_beats
from batchscope.explain.narration import narrate
from batchscope.explain.stepinfo import queues, request_status, text_so_far, visible_whitespace
from batchscope.facts import eviction
from batchscope.steplog.view import TraceView


def narration(view: TraceView, step: int, beats: bool = True) -> None:
    st.markdown(f"**{md(narrate(view, step))}**")
    if beats:
        for beat in story_beats(view).get(step, []):
            st.info(BEAT_TEXT[beat], icon=":material/lightbulb:")


def queue_rows(view: TraceView, q: dict[str, list[str]]) -> list[tuple[str, list[str], bool]]:
    """The queue panel's rows, ``(heading, request ids, shown when empty)``, in the engine's own words
    (``batchscope.facts.vocabulary``: "Retracted now" under SGLang); aborted requests apart from finished ones."""
    return [
        ("Waiting", q["waiting"], True),
        ("Running", q["running"], True),
        (eviction(view.header).now, q["preempted"], False),
        ("Finished (by the end of this step)", q["finished"], True),
        ("Aborted (by the end of this step)", q["aborted"], False),
    ]


def queue_panel(view: TraceView, step: int) -> None:
    q = queues(view, step)
    rows = queue_rows(view, q)
    html = "".join(
        f"<div style='margin:2px 0'><b>{name}:</b> {chips(view, ids)}</div>"
        for name, ids, always in rows
        if ids or always
    )
    st.markdown(html, unsafe_allow_html=True)


MAX_TEXT_ROWS = 200


def text_panel(view: TraceView, step: int) -> None:
    texts = text_so_far(view, step)
    if view.header.get("record_text") is False:  # a server's trace without text (the tracer's default): counts
        counts = dict.fromkeys(texts, 0)
        for s in (t for st_ in view.steps[: step + 1] for t in st_["sampled"]):
            counts[s["request_id"]] += 1
        texts = {r: f"{n} tokens (text not recorded)" for r, n in counts.items()}
    q = queues(view, step)
    status = request_status(view, step)
    if len(texts) > MAX_TEXT_ROWS:  # a server's trace: the requests in play at this step, not all of them
        in_play = {
            *q["running"],
            *q["waiting"],
            *q["preempted"],
            *(f["request_id"] for f in view.steps[step]["finished"]),
        }
        texts = {r: s for r, s in texts.items() if r in in_play}
    df = pd.DataFrame(
        {
            "request": [view.label(r) for r in texts],
            "status": [status.get(r, "") for r in texts],
            "generated so far": [visible_whitespace(x) for x in texts.values()],
        }
    )
    st.dataframe(df, hide_index=True, width="stretch", height=min(38 + 35 * len(df), 400))
