"""Predict the next step: quiz questions generated from a trace, by topic. Pure; no Streamlit."""
