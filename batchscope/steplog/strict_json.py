"""Strict, bounded parsing of one JSON Lines line: the trace reader and the workload reader share it.

Python's ``json.loads`` accepts more than JSON and more than a reader can afford:

- ``NaN``, ``Infinity`` and ``-Infinity`` (not JSON: a browser's ``JSON.parse`` or ``jq`` refuse them), and
  ``1e999``, which it silently turns into ``inf``;
- integers of any length (a 100,000-digit integer costs quadratic time to convert);
- any nesting depth, until the interpreter's recursion limit;
- lines of any length.

``parse_line`` refuses all of these before or while parsing, with one line that names the line number and, where it
can, the field (``JSONLineError.field``, so that a reader can add the field's own range). Every number it returns
is finite and every integer has at most 19 digits; each field's own range is checked by its reader (the schema of a
trace, ``batchscope.inputs.spec`` for a workload).
"""

from __future__ import annotations

import json
import math
import re

MAX_LINE_CHARS = 16 * 1024 * 1024  # one step record of a large run is well under 1 MB
MAX_DEPTH = 32  # a trace record nests 5 deep (step -> kv -> block_tables -> table -> id)
MAX_INT_DIGITS = 19  # 2**63 has 19 digits; larger integers are refused


class JSONLineError(ValueError):
    """A line that is not strict, bounded JSON. The message starts with ``where``; ``field`` is the key holding the
    refused number (directly or in a list), where it could be found."""

    def __init__(self, message: str, field: str | None = None, token: str | None = None):
        super().__init__(message)
        self.field, self.token = field, token


class _Refused(Exception):
    def __init__(self, token: str, why: str):
        super().__init__(token)
        self.token, self.why = token, why
        self.shown = token[:40] + ("..." if len(token) > 40 else "")


def _refuse_constant(token: str):
    raise _Refused(token, "is not a JSON number (numbers must be finite)")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(text, "is too large for a 64-bit float (numbers must be finite)")
    return value


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise _Refused(text, f"has more than {MAX_INT_DIGITS} digits")
    return int(text)


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)


def nesting_depth(line: str) -> int:
    """Deepest nesting of ``[`` / ``{`` in ``line``, ignoring brackets inside strings (a cheap pre-check)."""
    if line.count("[") + line.count("{") <= MAX_DEPTH:
        return line.count("[") + line.count("{")
    import numpy as np

    data = np.frombuffer(_STRING.sub('""', line).encode("utf-8", "replace"), dtype=np.uint8)
    delta = np.isin(data, (ord("["), ord("{"))).astype(np.int32) - np.isin(data, (ord("]"), ord("}")))
    return int(np.cumsum(delta).max(initial=0))


def is_cut(line: str) -> bool:
    """Whether ``line`` ends inside a JSON value it opened (a bracket left open, or a string), as a record cut by a
    writer that stopped mid-line ends; a whole line that is bad (``NaN``, a stray comma) closes its brackets."""
    text = _STRING.sub("0", line)
    if '"' in text:  # a string that never ends: the line was cut inside it
        return True
    return text.count("{") + text.count("[") > text.count("}") + text.count("]")


def _field_of(line: str, token: str) -> str | None:
    """The key whose value is ``token`` in ``line``, directly (``"key": token``) or as an item of a flat list
    (``"key": [1, token]``); ``None`` if neither is found."""
    m = re.search(
        r'"((?:[^"\\]|\\.){1,80})"\s*:\s*(?:\[(?:[^\[\]{}"]*?,)?\s*)?' + re.escape(token) + r"(?![\w.])", line
    )
    return m.group(1) if m else None


def parse_line(line: str, where: str) -> object:
    """Parse one line of strict JSON. Raises ``JSONLineError`` whose message starts with ``where``."""
    if len(line) > MAX_LINE_CHARS:
        raise JSONLineError(f"{where}: {len(line):,} characters; a line may hold at most {MAX_LINE_CHARS:,}")
    if nesting_depth(line) > MAX_DEPTH:
        raise JSONLineError(f"{where}: nested deeper than {MAX_DEPTH} levels")
    try:
        return json.loads(line, parse_constant=_refuse_constant, parse_float=_finite_float, parse_int=_bounded_int)
    except _Refused as exc:
        field = _field_of(line, exc.token)
        message = f"{where}: {'field ' + repr(field) + ': ' if field else ''}{exc.shown} {exc.why}"
        raise JSONLineError(message, field, exc.shown) from None
    except json.JSONDecodeError as exc:
        return _raise(f"{where}: not valid JSON ({exc.msg}, column {exc.colno})")
    except (ValueError, RecursionError) as exc:
        return _raise(f"{where}: not valid JSON ({str(exc)[:120]})")


def _raise(message: str):
    raise JSONLineError(message) from None


def non_finite_path(value: object, path: str = "") -> str | None:
    """The path (``a/0/b``) of the first non-finite float inside ``value``, or ``None`` if every number is finite."""
    if isinstance(value, float):
        return None if math.isfinite(value) else (path or "(value)")
    if isinstance(value, dict):
        items: list[tuple[object, object]] = list(value.items())
    elif isinstance(value, (list, tuple)):
        items = list(enumerate(value))
    else:
        return None
    for k, v in items:
        found = non_finite_path(v, f"{path}/{k}" if path else str(k))
        if found:
            return found
    return None
