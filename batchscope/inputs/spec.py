"""One request spec (a workload line), checked strictly before any model loads.

Strict means what a JSON user expects of a typed field: ``"ignore_eos": "false"`` is a string, not a boolean, and is
refused; ``"seed": false`` and ``"max_tokens": true`` are booleans, not integers, and are refused; numbers are finite;
``arrival_time`` (seconds) and ``arrival_step`` (step clock) are two clocks, so a spec gives at most one of them.
Every message starts with where the spec came from (``my.jsonl line 3``) and names the field and what it must be.
"""

from __future__ import annotations

import math

from batchscope.engine.request import INT_RANGES, FieldError, SamplingParams, int_in_range, range_text
from batchscope.steplog.checks import WORKLOAD_ID_CHARS, request_id_problem


def _ints(name: str, what: str = "an integer", note: str = "") -> str:
    """What an integer field must be: ``an integer in [1, 2**31 - 1]`` (its range from ``INT_RANGES``)."""
    return f"{what} in {range_text(*INT_RANGES[name])}{note}"


# field -> (JSON type, what it must be). Every integer field (and each id of prompt_token_ids) has its range in
# ``batchscope.engine.request.INT_RANGES``, checked by ``_check_contents`` and ``_check_ranges``.
FIELDS: dict[str, tuple[str, str]] = {
    "request_id": ("string", f"a string of 1-{WORKLOAD_ID_CHARS} printable characters"),
    "prompt": ("string", "a non-empty string"),
    "messages": ("list", "a non-empty list of {'role': string, 'content': string} objects"),
    "prompt_token_ids": ("list", _ints("prompt_token_ids", "a non-empty list of integer token ids")),
    "max_tokens": ("integer", _ints("max_tokens")),
    "temperature": ("number", "a number in [0, 10]"),
    "top_p": ("number", "a number in [0, 1]"),
    "top_k": ("integer", _ints("top_k", note=" (0 turns top-k off)")),
    "seed": ("integer|null", _ints("seed", note=" or null")),
    "ignore_eos": ("boolean", "true or false"),
    "arrival_time": ("number", "a number of seconds >= 0"),
    "arrival_step": ("integer", _ints("arrival_step", "an integer step")),
    "abort_step": ("integer", _ints("abort_step", "an integer step")),
    "priority": ("integer", _ints("priority", note=" (lower runs first under the priority policy)")),
}
INT_FIELDS = tuple(name for name, (kind, _) in FIELDS.items() if "integer" in kind)


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
    if "request_id" in spec and (problem := request_id_problem(spec["request_id"], WORKLOAD_ID_CHARS)):
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
        bad = next((i for i, t in enumerate(ids) if not int_in_range(t, "prompt_token_ids")), None)
        if not ids or bad is not None:
            got = f"prompt_token_ids[{bad}] = {_short(ids[bad])}" if bad is not None else "[]"
            raise WorkloadError(
                f"{where}, field 'prompt_token_ids': must be {FIELDS['prompt_token_ids'][1]}, got {got}"
            )


def _check_ranges(spec: dict, where: str) -> None:
    """Every integer field within its range (``INT_RANGES``), then the sampling fields (``SamplingParams.validate``:
    the same ranges the engine checks) and the arrival time."""
    for name in INT_FIELDS:
        value = spec.get(name)
        if value is not None and not int_in_range(value, name):
            raise WorkloadError(f"{where}, field '{name}': must be {FIELDS[name][1]}, got {_short(value)}")
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
