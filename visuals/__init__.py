"""Pure functions from a trace (and a step) to plotly figures. No Streamlit here, so tests can read the figures."""
