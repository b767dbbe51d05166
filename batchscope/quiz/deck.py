"""Predict the next step: quiz questions generated from a trace, never from a fixed list.

``question(view, step, seed)`` shows the state at the *start* of ``step`` and asks about what the log of ``step``
says: who is admitted (or why the head waits), how many tokens a request computes, KV blocks in use afterwards,
whether a request samples, who is preempted and what it will recompute, who finishes and what they release, the
unused budget, static padding rows, prefix-cache hits, and TTFT / TPOT / E2E in steps. Each kind is generated only
where it makes sense (``quiz_kinds.KINDS``). Wrong options are plausible mistakes (an off-by-one chunk, the second
request in the queue, a finished request's blocks counted as still used) and are checked never to equal the right
answer. Everything is deterministic given (trace, step, seed).
"""

from __future__ import annotations

import random

from batchscope.quiz.kinds import KINDS
from batchscope.quiz.types import Choice, Question, Target, fmt_number, int_choices, make_choices, show_me
from batchscope.steplog.view import TraceView

__all__ = [
    "Choice",
    "Question",
    "Target",
    "fmt_number",
    "history",
    "int_choices",
    "make_choices",
    "question",
    "questions",
    "random_step",
    "rng_for",
    "show_me",
]


def rng_for(seed: int | str, step: int, kind: str) -> random.Random:
    """A generator that depends only on (seed, step, kind): the same question every time."""
    return random.Random(f"{seed}:{step}:{kind}")


def questions(view: TraceView, step: int, seed: int | str = 0) -> list[Question]:
    """Every kind of question that makes sense at ``step``, in ``KINDS`` order (none at an idle step)."""
    if view.steps[step].get("idle"):
        return []
    out = []
    for kind, make in KINDS.items():
        q = make(view, step, rng_for(seed, step, kind))
        if q is not None:
            out.append(q)
    return out


def question(view: TraceView, step: int, seed: int | str = 0, kind: str | None = None) -> Question | None:
    """One question about ``step``: of ``kind`` if given (``None`` if it does not apply there), else one of the
    kinds that apply, chosen by ``seed``."""
    qs = [q for q in questions(view, step, seed) if kind is None or q.kind == kind]
    if not qs:
        return None
    return qs[rng_for(seed, step, "pick").randrange(len(qs))]


def random_step(view: TraceView, seed: int | str) -> int:
    """A step chosen by ``seed`` (the quiz's "random" step)."""
    return random.Random(f"{seed}:step").randrange(view.num_steps)


def history(view: TraceView, step: int) -> TraceView:
    """The trace as known when ``step`` starts: the header and steps ``0 .. step - 1`` only, so a figure drawn from
    it cannot give away the answer (the summary is kept for the record format; nothing reads it)."""
    past = TraceView([view.header, *view.steps[:step], view.summary])
    past.source, past.filename = getattr(view, "source", "recorded"), getattr(view, "filename", "")
    return past
