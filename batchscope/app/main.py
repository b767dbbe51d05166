"""The app's entry: the navigation over the pages of ``batchscope.app``, and the presenter toggle every page shows.
Streamlit runs it as a script: ``streamlit run app.py`` from a checkout (the root ``app.py`` calls ``run``), or
``batchscope app`` from an install, which runs this file.

Presenter mode (the toggle, or ``?present=1``; ``batchscope.app.state.presenting``) hides the sidebar and the header
and sets the page's type larger on every page; a page with the player shows the player alone, edge to edge
(``batchscope.app.web_player``). The toggle stays in the top right corner in both modes, one click either way."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from batchscope.app import (
    page_glossary,
    page_lockstep,
    page_metrics,
    page_playground,
    page_quiz,
    page_trace,
    page_walkthrough,
)
from batchscope.app.state import PRESENT_KEY, presenting

ICON = Path(__file__).resolve().parent / "icon.png"  # a local file: a Material icon would be fetched

# The toggle's corner: in the header's band, left of Streamlit's own menu; in presenter mode (no header) the page's
# top right corner, the switch alone (its label kept for screen readers). Kept visible where presenter mode hides every
# block but the player's frame.
TOGGLE_CSS = """<style>
[data-testid='stMainBlockContainer'] [data-testid='stVerticalBlock'] > :has(> .st-key-bs-present) {
  display: block !important; position: fixed; top: 0.6rem; right: 8rem; z-index: 999991; width: auto !important;}
[data-testid='stMainBlockContainer'] [data-testid='stVerticalBlock'].st-key-bs-present > * {display: block !important}
.st-key-bs-present label {background: var(--background-color, #fff); border-radius: 8px; padding: 2px 8px;}
</style>"""
# Presenter mode on every page: no sidebar, header or toolbar; the page full width; all type (Streamlit's sizes are
# rem) 1.3x, so body text is about 21 px at 1280x720.
PRESENT_PAGE_CSS = """<style>
html {font-size: 21px;}
[data-testid='stSidebar'], [data-testid='stSidebarCollapsedControl'], header[data-testid='stHeader'] {display: none}
[data-testid='stMainBlockContainer'] {padding-top: 1.2rem !important; max-width: 100% !important}
[data-testid='stMainBlockContainer'] [data-testid='stVerticalBlock'] > :has(> .st-key-bs-present) {top: 2px; right: 4px}
.st-key-bs-present [data-testid='stWidgetLabel'], .st-key-bs-present [data-testid='stTooltipIcon'] {position: absolute;
  width: 1px; height: 1px; overflow: hidden; clip-path: inset(50%);}
</style>"""


def run() -> None:
    """Build the navigation and run the page the URL names (Streamlit calls this script on every rerun)."""
    st.set_page_config(page_title="Batchscope", layout="wide", page_icon=str(ICON))

    pages = [
        st.Page(
            page_walkthrough.page, title="Walkthrough", url_path="walkthrough", default=True, icon=":material/school:"
        ),
        st.Page(page_lockstep.page, title="Compare runs", url_path="compare", icon=":material/compare:"),
        st.Page(page_metrics.page, title="Metrics", url_path="metrics", icon=":material/speed:"),
        st.Page(page_playground.page, title="Playground", url_path="playground", icon=":material/tune:"),
        st.Page(page_trace.page, title="Trace", url_path="trace", icon=":material/data_object:"),
        st.Page(page_quiz.page, title="Quiz", url_path="quiz", icon=":material/quiz:"),
        st.Page(page_glossary.page, title="Glossary", url_path="glossary", icon=":material/menu_book:"),
    ]
    navigation = st.navigation(pages)
    on = presenting()
    corner = st.container(key="bs-present")  # the toggle, drawn after the page: before, it held a player back
    st.html(TOGGLE_CSS + (PRESENT_PAGE_CSS if on else ""))
    try:
        navigation.run()
    finally:
        with corner:
            st.toggle(
                ":material/co_present: Presenter mode",
                key=PRESENT_KEY,
                help="large type, no sidebar; the player alone, edge to edge, its tour's notes on (same as ?present=1)",
            )


if __name__ == "__main__":
    run()
