"""Streamlit pages and widgets. Figures come from ``visuals``; traces from ``engine``; this package is glue."""
