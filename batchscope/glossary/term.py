"""One glossary term: its words, its formula and the rule that finds where it happens in a trace. Kept apart from
the lists of terms (``glossary_terms``, ``glossary_serving``) so that both can build terms without importing each
other."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from batchscope.steplog.view import TraceView

Key = tuple[str, str]  # (scenario, policy)
Found = tuple[int, str] | None  # (step, what you see there), or nowhere


@dataclass(frozen=True)
class Term:
    key: str
    name: str
    text: str
    formula: str
    find: Callable[[TraceView], Found]
    home: tuple[Key, ...] = (("seed-abcd", "continuous"),)  # searched first, then every other trace
