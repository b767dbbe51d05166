"""One request spec (a workload line), checked strictly before any model loads.

Strict means what a JSON user expects of a typed field: ``"ignore_eos": "false"`` is a string, not a boolean, and is
refused; ``"seed": false`` and ``"max_tokens": true`` are booleans, not integers, and are refused; numbers are finite;
``arrival_time`` (seconds) and ``arrival_step`` (step clock) are two clocks, so a spec gives at most one of them.
Every message starts with where the spec came from (``my.jsonl line 3``) and names the field and what it must be.
"""

from __future__ import annotations

import math

from engine.request import FieldError, SamplingParams
from steplog.checks import request_id_problem

# field -> (JSON type, what it must be); range checks follow in ``_check_ranges``.
FIELDS: dict[str, tuple[str, str]] = {
    "request_id": ("string", "a string of 1-64 printable characters"),
    "prompt": ("string", "a non-empty string"),
    "messages": ("list", "a non-empty list of {'role': string, 'content': string} objects"),
    "prompt_token_ids": ("list", "a non-empty list of integer token ids >= 0"),
    "max_tokens": ("integer", "an integer >= 1"),
    "temperature": ("number", "a number in [0, 10]"),
    "top_p": ("number", "a number in [0, 1]"),
    "top_k": ("integer", "an integer >= 0 (0 turns top-k off)"),
    "seed": ("integer|null", "an integer in [0, 2**63) or null"),
    "ignore_eos": ("boolean", "true or false"),
    "arrival_time": ("number", "a number of seconds >= 0"),
    "arrival_step": ("integer", "an integer step >= 0"),
    "priority": ("integer", "an integer in [-2**63, 2**63 - 1] (lower runs first under the priority policy)"),
}
MAX_ARRIVAL_STEP = 2**62


class WorkloadError(ValueError):
    """A workload line or scenario that cannot be used; the message names the line and the field."""


def _is_type(value: object, kind: str) -> bool:
    if kind == "integer|null":
        return value is None or _is_type(value, "integer")
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if kind == "boolean":
        return isinstance(value, bool)
    return isinstance(value, {"string": str, "list": list}[kind])


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def parse_spec(obj: object, where: str) -> dict:
    """Check one request spec (types, required fields, ranges); returns a copy.

    Raises:
        WorkloadError: ``"{where}, field 'name': must be ..., got ..."`` (or what is missing / unknown).
    """
    if not isinstance(obj, dict):
        raise WorkloadError(f"{where}: expected a JSON object (one request), got {type(obj).__name__}")
    unknown = sorted(map(str, set(obj) - set(FIELDS)))
    if unknown:
        raise WorkloadError(f"{where}: unknown field(s) {unknown[:5]}; allowed: {sorted(FIELDS)}")
    sources = [k for k in ("prompt", "messages", "prompt_token_ids") if k in obj]
    if len(sources) != 1:
        raise WorkloadError(f"{where}: give exactly one of 'prompt', 'messages' or 'prompt_token_ids' (got {sources})")
    if "max_tokens" not in obj:
        raise WorkloadError(f"{where}: missing field 'max_tokens' (an integer >= 1)")
    if "arrival_time" in obj and "arrival_step" in obj:
        raise WorkloadError(
            f"{where}: give at most one of 'arrival_time' (seconds) and 'arrival_step' (step clock), not both"
        )
    for name, value in obj.items():
        kind, must = FIELDS[name]
        if not _is_type(value, kind):
            raise WorkloadError(f"{where}, field '{name}': must be {must}, got {_short(value)}")
    _check_contents(obj, where)
    _check_ranges(obj, where)
    return dict(obj)


def _check_contents(spec: dict, where: str) -> None:
    """Request id, prompt text, chat messages and token ids."""
    if "request_id" in spec and (problem := request_id_problem(spec["request_id"])):
        raise WorkloadError(f"{where}, field 'request_id': {problem}")
    if spec.get("prompt") == "":
        raise WorkloadError(f"{where}, field 'prompt': must be {FIELDS['prompt'][1]}, got ''")
    msgs = spec.get("messages")
    if msgs is not None and not (
        msgs
        and all(
            isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str) for m in msgs
        )
    ):
        raise WorkloadError(f"{where}, field 'messages': must be {FIELDS['messages'][1]}, got {_short(msgs)}")
    ids = spec.get("prompt_token_ids")
    if ids is not None:
        bad = next((i for i, t in enumerate(ids) if not _is_type(t, "integer") or t < 0), None)
        if not ids or bad is not None:
            got = f"prompt_token_ids[{bad}] = {_short(ids[bad])}" if bad is not None else "[]"
            raise WorkloadError(
                f"{where}, field 'prompt_token_ids': must be {FIELDS['prompt_token_ids'][1]}, got {got}"
            )


def _check_ranges(spec: dict, where: str) -> None:
    """Sampling fields (``SamplingParams.validate``: the same ranges the engine checks) and arrivals."""
    try:
        SamplingParams(
            temperature=spec.get("temperature", 0.0),
            top_p=spec.get("top_p", 1.0),
            top_k=spec.get("top_k", 0),
            seed=spec.get("seed"),
            max_tokens=spec["max_tokens"],
        ).validate(where)
    except FieldError as exc:
        raise WorkloadError(f"{where}, field '{exc.field}': {exc.value} is out of range {exc.allowed}") from None
    if spec.get("arrival_time", 0.0) < 0:
        raise WorkloadError(
            f"{where}, field 'arrival_time': must be {FIELDS['arrival_time'][1]}, got {spec['arrival_time']}"
        )
    if not -(2**63) <= spec.get("priority", 0) <= 2**63 - 1:
        raise WorkloadError(f"{where}, field 'priority': must be {FIELDS['priority'][1]}, got {spec['priority']}")
    if not 0 <= spec.get("arrival_step", 0) <= MAX_ARRIVAL_STEP:
        raise WorkloadError(
            f"{where}, field 'arrival_step': must be an integer in [0, 2**62], got {spec['arrival_step']}"
        )
