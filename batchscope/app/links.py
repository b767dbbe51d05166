"""Links between pages that carry a step: ``st.page_link`` needs the linked page as a ``st.Page`` whose url_path
matches the one ``app.py`` registers, so the link stays in the same session (the score, a live run) and the
target page reads its step from the URL."""

from __future__ import annotations

import streamlit as st

from batchscope.quiz.deck import Target

TITLES = {"walkthrough": "Walkthrough", "trace": "Trace", "compare": "Compare runs"}


def _page(url_path: str):
    from batchscope.app import page_lockstep, page_trace, page_walkthrough

    pages = {"walkthrough": page_walkthrough.page, "trace": page_trace.page, "compare": page_lockstep.page}
    return st.Page(pages[url_path], title=TITLES[url_path], url_path=url_path)


def step_link(target: Target, label: str) -> None:
    """A link that opens ``target`` (a page and its query: scenario, policy, step)."""
    st.page_link(_page(target.page), label=label, query_params=target.query, icon=":material/visibility:")


def page_link(url_path: str, label: str, query: dict[str, str]) -> None:
    """A link that opens the page ``url_path`` (walkthrough, trace or compare) with ``query`` in its URL."""
    st.page_link(_page(url_path), label=label, query_params=query, icon=":material/open_in_new:")
