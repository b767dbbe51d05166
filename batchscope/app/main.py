"""The app's entry: the navigation over the pages of ``batchscope.app``. Streamlit runs it as a script: ``streamlit run
app.py`` from a checkout (the root ``app.py`` calls ``run``), or ``batchscope app`` from an install, which runs this
file."""

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

ICON = Path(__file__).resolve().parent / "icon.png"  # a local file: a Material icon would be fetched


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
    st.navigation(pages).run()


if __name__ == "__main__":
    run()
