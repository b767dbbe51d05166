"""The glossary: terms of LLM serving, each with a "see it" link found in the recorded traces. Pure; no Streamlit."""
