"""The step log (trace): JSON Lines, one header, one record per step, one summary.

The format is documented in ``docs/trace-format.md`` and pinned by the JSON Schema ``steplog/trace.schema.json``
(package data, found through the installed package); every trace written or read here is validated against it.
Traces are plain data: never pickle, never eval.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from pathlib import Path

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
        if kind == "step":
            _check_kv(rec["kv"], i)


def _check_kv(kv: dict, line: int) -> None:
    """Reference counts and cache flags must agree with the block tables (traces that record them).

    A block's count is the number of tables holding it (``ref_counts`` lists counts above 1); a cached free block
    is in no table; ``num_used_blocks`` counts each held block once.
    """
    if "ref_counts" not in kv:
        return
    holders: dict[int, list[str]] = {}
    for rid, table in kv["block_tables"].items():
        for b in table:
            holders.setdefault(b, []).append(rid)
    where = f"line {line} (step), field kv"
    for b, rids in sorted(holders.items()):
        recorded = kv["ref_counts"].get(str(b), 1)
        if recorded != len(rids):
            raise TraceError(
                f"{where}/ref_counts/{b}: block {b} is in {len(rids)} block table(s) ({', '.join(rids)}) but its "
                f"reference count is {recorded}; the count must equal the tables holding the block"
            )
    extra = sorted(int(b) for b in kv["ref_counts"] if int(b) not in holders)
    if extra:
        raise TraceError(f"{where}/ref_counts/{extra[0]}: block {extra[0]} has a count but is in no block table")
    for b in kv.get("cached_free_blocks", []):
        if b in holders:
            raise TraceError(
                f"{where}/cached_free_blocks: block {b} is marked cached and free but is in the block table of "
                f"{holders[b][0]}; a free block (count 0) is in no table"
            )
    if kv["num_used_blocks"] != len(holders):
        raise TraceError(
            f"{where}/num_used_blocks: {kv['num_used_blocks']}, but the block tables hold {len(holders)} "
            "distinct blocks"
        )


def dumps(records: list[dict]) -> str:
    """Records as JSON Lines text (validated first)."""
    validate_records(records)
    return "".join(json.dumps(rec, ensure_ascii=False, separators=(",", ":")) + "\n" for rec in records)


def write(records: list[dict], path: str | Path) -> None:
    """Validate and write a trace file."""
    Path(path).write_text(dumps(records), encoding="utf-8")


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
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TraceError(f"line {i}: not valid JSON ({exc.msg}, column {exc.colno})") from None
        if not isinstance(rec, dict):
            raise TraceError(f"line {i}: expected a JSON object, got {type(rec).__name__}")
        records.append(rec)
    validate_records(records)
    return records


def read(path: str | Path) -> list[dict]:
    """Read and validate a trace file."""
    p = Path(path)
    if p.stat().st_size > MAX_TRACE_BYTES:
        raise TraceError(f"{p.name} is {p.stat().st_size / 1e6:.1f} MB; the limit is {MAX_TRACE_BYTES / 1e6:.0f} MB")
    return loads(p.read_bytes())
