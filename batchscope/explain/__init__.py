"""Explanations of a trace in words: narration, key moments, checklist, stories. Pure; no Streamlit."""
