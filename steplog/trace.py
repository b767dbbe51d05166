"""The step log (trace): JSON Lines, one header, one record per step, one summary.

The format is documented in ``docs/trace-format.md`` and pinned by the JSON Schema ``steplog/trace.schema.json``
(package data, found through the installed package); every trace written or read here is validated against it.
Traces are plain data: never pickle, never eval. Reading is strict and bounded (``steplog.strict_json``: no
``NaN`` or ``Infinity``, no 1000-digit integers, no deep nesting, no endless line) and then checks what the schema
cannot (``steplog.checks``: finite numbers, time that never runs backwards, ids, slots and blocks that exist), so
that every trace read here can be measured and drawn. Writing never emits a non-finite number and replaces the
file atomically (a temporary file in the same folder, then a rename).
"""

from __future__ import annotations

import json
import os
import tempfile
from functools import lru_cache
from importlib import resources
from pathlib import Path

from steplog.checks import CheckError, check_records
from steplog.strict_json import JSONLineError, parse_line

SCHEMA_VERSION = 1
MAX_TRACE_BYTES = 50 * 1024 * 1024


class TraceError(ValueError):
    """A trace that is malformed, truncated, too large, of another schema version, or fails the schema."""


def schema_text() -> str:
    """The JSON Schema of trace files, read from the installed package."""
    return resources.files("steplog").joinpath("trace.schema.json").read_text(encoding="utf-8")


@lru_cache(maxsize=1)
def _validators():
    import jsonschema

    schema = json.loads(schema_text())
    defs = schema["$defs"]
    return {
        kind: jsonschema.Draft202012Validator({**defs[kind], "$defs": defs}) for kind in ("header", "step", "summary")
    }


def validate_records(records: list[dict]) -> None:
    """Check order (header, steps, summary) and each record against the schema.

    Raises:
        TraceError: naming the line (1-based) and the first problem found.
    """
    if not records:
        raise TraceError("trace is empty: expected a header line, step lines and a summary line")
    if records[0].get("type") != "header":
        raise TraceError("line 1: the first record must have type 'header'")
    version = records[0].get("schema_version")
    if version != SCHEMA_VERSION:
        raise TraceError(f"line 1: schema_version={version!r}; this Batchscope reads version {SCHEMA_VERSION}")
    if records[-1].get("type") != "summary":
        raise TraceError(f"line {len(records)}: the last record must have type 'summary' (truncated trace?)")
    validators = _validators()
    for i, rec in enumerate(records, start=1):
        kind = rec.get("type")
        expected = "header" if i == 1 else "summary" if i == len(records) else "step"
        if kind != expected:
            raise TraceError(f"line {i}: type={kind!r}, expected {expected!r}")
        error = next(iter(validators[kind].iter_errors(rec)), None)
        if error is not None:
            path = "/".join(map(str, error.absolute_path)) or "(record)"
            raise TraceError(f"line {i} ({kind}), field {path}: {error.message[:300]}")
    try:
        check_records(records)
    except CheckError as exc:
        raise TraceError(str(exc)) from None


def dumps(records: list[dict]) -> str:
    """Records as JSON Lines text (validated first; never ``NaN`` or ``Infinity``)."""
    validate_records(records)
    return "".join(
        json.dumps(rec, ensure_ascii=False, separators=(",", ":"), allow_nan=False) + "\n" for rec in records
    )


def write_text_atomic(text: str, path: str | Path) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder and a rename: a reader (or a crash)
    sees the old file or the new one, never half of one."""
    p = Path(path)
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write(records: list[dict], path: str | Path) -> None:
    """Validate and write a trace file (atomically)."""
    write_text_atomic(dumps(records), path)


def loads(text: str | bytes) -> list[dict]:
    """Parse and validate JSON Lines text. Raises ``TraceError`` with the line number of any problem."""
    if len(text) > MAX_TRACE_BYTES:
        raise TraceError(f"trace is {len(text) / 1e6:.1f} MB; the limit is {MAX_TRACE_BYTES / 1e6:.0f} MB")
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise TraceError(f"trace is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    records = []
    for i, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rec = parse_line(line, f"line {i}")
        except JSONLineError as exc:
            raise TraceError(str(exc)) from None
        if not isinstance(rec, dict):
            raise TraceError(f"line {i}: expected a JSON object, got {type(rec).__name__}")
        records.append(rec)
    validate_records(records)
    return records


def read(path: str | Path) -> list[dict]:
    """Read and validate a trace file."""
    p = Path(path)
    if p.is_dir():
        raise TraceError(f"{p} is a folder, not a trace file")
    if p.stat().st_size > MAX_TRACE_BYTES:
        raise TraceError(f"{p.name} is {p.stat().st_size / 1e6:.1f} MB; the limit is {MAX_TRACE_BYTES / 1e6:.0f} MB")
    return loads(p.read_bytes())
