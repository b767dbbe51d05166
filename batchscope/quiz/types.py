"""The quiz's value types and option helpers: a question, its choices, where "show me" goes.

Kept apart from ``batchscope.quiz.deck`` (which generates questions through the kinds' registry,
``batchscope.quiz.kinds``) so that the generators (``quiz_sched``, ``quiz_more``) import these without importing the
module that imports them.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from batchscope.explain.stories import STORIES
from batchscope.steplog.reasons import run_name
from batchscope.steplog.view import TraceView


@dataclass(frozen=True)
class Target:
    """Where "show me" opens the trace at the step: an app page (``url_path``) and its query parameters.
    ``page`` is empty when no page can load the trace (an imported file): the quiz then shows the step itself."""

    page: str
    query: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        if not self.page:
            return ""
        return f"/{self.page}?" + "&".join(f"{k}={v}" for k, v in self.query.items())


@dataclass(frozen=True)
class Choice:
    """One option: the text shown and the value it stands for (compared with the answer's value)."""

    label: str
    value: Any


@dataclass(frozen=True)
class Question:
    """``choices`` empty: answer with a number (``value``, within ``tolerance``); else pick one choice."""

    kind: str
    step: int
    text: str
    value: Any
    explanation: str
    target: Target
    choices: tuple[Choice, ...] = ()
    subject: str | None = None
    tolerance: float = 0.0

    @property
    def is_numeric(self) -> bool:
        return not self.choices

    @property
    def answer_label(self) -> str:
        if self.is_numeric:
            return fmt_number(self.value)
        return next(c.label for c in self.choices if c.value == self.value)

    def is_right(self, given: Any) -> bool:
        """``given``: a number for a numeric question, a choice label (or a Choice) otherwise."""
        if self.is_numeric:
            try:
                return abs(float(given) - float(self.value)) <= self.tolerance + 1e-9
            except (TypeError, ValueError):
                return False
        label = given.label if isinstance(given, Choice) else given
        return any(c.label == label and c.value == self.value for c in self.choices)


def fmt_number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:.2f}"


def make_choices(right: Choice, wrong: list[Choice], rng: random.Random, max_wrong: int = 3) -> tuple[Choice, ...]:
    """The right choice plus up to ``max_wrong`` distinct wrong ones (in the order given: most plausible first;
    any whose value or label equals the right one's is dropped), shuffled."""
    picked: list[Choice] = []
    for c in wrong:
        if c.value == right.value or c.label == right.label:
            continue
        if any(c.value == p.value or c.label == p.label for p in picked):
            continue
        picked.append(c)
        if len(picked) == max_wrong:
            break
    out = [right, *picked]
    rng.shuffle(out)
    return tuple(out)


def int_choices(right: int, wrong: list[int], rng: random.Random, unit: str = "", lo: int = 0) -> tuple[Choice, ...]:
    """Numeric options: ``right`` plus the plausible mistakes in ``wrong`` (kept if >= ``lo``), topped up with
    ``right`` +- 1, 2 so there are always four. ``unit`` is singular ("token"); labels read "1 token", "3 tokens".
    """
    cands = [w for w in wrong if w >= lo] + [right + 1, right - 1, right + 2, right - 2, right + 3]

    def label(n: int) -> str:
        return f"{n} {unit}{'' if n == 1 else 's'}" if unit else str(n)

    return make_choices(Choice(label(right), right), [Choice(label(w), w) for w in cands if w >= lo], rng)


def show_me(view: TraceView, step: int) -> Target:
    """The page that shows this trace at ``step``: the Walkthrough for a recorded trace of one of its stories
    (``batchscope.explain.stories``), the Trace page for other recorded scenarios and for the Playground's live runs
    (named by their label, the view's ``filename``: a policy or "run A"), nothing for an imported file."""
    source = getattr(view, "source", "recorded")
    scenario = view.header.get("scenario")
    story, name = STORIES.get(scenario or ""), run_name(view.header)  # a story names its runs (trtllm_max_utilization)
    if source == "recorded" and story and name in story.policies:
        extra = {} if scenario == "seed-abcd" else {"story": story.scenario}
        return Target("walkthrough", {**extra, "policy": name, "step": str(step)})
    if source == "recorded" and scenario:
        return Target("trace", {"scenario": scenario, "policy": run_name(view.header), "step": str(step)})
    if source == "live":
        return Target("trace", {"live": getattr(view, "filename", "") or view.policy, "step": str(step)})
    return Target("")
