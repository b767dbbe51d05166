"""Batchscope: see how an LLM serving engine schedules requests, from the step logs of real runs.

Thin entry point: builds the navigation. Pages live in ``ui/``, figures in ``visuals/``, the engine in
``engine/``. Run with ``streamlit run app.py``.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from ui import page_glossary, page_lockstep, page_metrics, page_playground, page_quiz, page_trace, page_walkthrough

ICON = Path(__file__).resolve().parent / "assets" / "icon.png"  # a local file: a Material icon would be fetched
st.set_page_config(page_title="Batchscope", layout="wide", page_icon=str(ICON))

pages = [
    st.Page(page_walkthrough.page, title="Walkthrough", url_path="walkthrough", default=True, icon=":material/school:"),
    st.Page(page_lockstep.page, title="Compare runs", url_path="compare", icon=":material/compare:"),
    st.Page(page_metrics.page, title="Metrics", url_path="metrics", icon=":material/speed:"),
    st.Page(page_playground.page, title="Playground", url_path="playground", icon=":material/tune:"),
    st.Page(page_trace.page, title="Trace", url_path="trace", icon=":material/data_object:"),
    st.Page(page_quiz.page, title="Quiz", url_path="quiz", icon=":material/quiz:"),
    st.Page(page_glossary.page, title="Glossary", url_path="glossary", icon=":material/menu_book:"),
]
st.navigation(pages).run()
