"""Figures of a trace (plotly): slots, KV block map, budget, timeline, gauges, metrics, step cost. Pure; no
Streamlit."""
