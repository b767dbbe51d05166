"""Batchscope: see how an LLM serving engine schedules requests. Importing this package imports nothing.

Packages by concept: ``engine`` (the step loop, requests, configs), ``scheduling`` (vLLM-style scheduler, block pool
and KV block manager), ``sglang_family`` (SGLang's scheduling family), ``model`` (the model runner), ``inputs``
(workloads and scenarios), ``cli``; ``steplog`` (the trace format, its reader and analysis); ``figures``, ``explain``,
``quiz``, ``glossary``, ``player``, ``compare`` (the visuals); ``app`` (the Streamlit pages); ``bench`` and ``tools``.
"""
