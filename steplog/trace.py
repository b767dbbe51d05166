"""The step log (trace): JSON Lines, one header, one record per step, one summary.

The format is documented in ``docs/trace-format.md`` and pinned by the JSON Schema ``steplog/trace.schema.json``
(package data, found through the installed package); every trace written or read here is validated against it
(``steplog.schemacheck``'s compiled check, with ``jsonschema`` naming the problem when one is found). Versions 1
(every block table in every step) and 2 (what changed: ``kv.allocated``, ``kv.freed``) are read; a path or text
that is gzip data (``.jsonl.gz``) is decompressed transparently, and the size limit applies to the uncompressed
text. Traces are plain data: never pickle, never eval.

Reading is strict and bounded (``steplog.strict_json``: no ``NaN`` or ``Infinity``, no 1000-digit integers, no deep
nesting, no endless line) and then checks what the schema cannot (``steplog.checks``: finite numbers, time that never
runs backwards, ids, slots and blocks that exist), so that every trace read here can be measured and drawn. Writing
never emits a non-finite number and replaces the file atomically (a temporary file in the same folder, then a
rename).
"""

from __future__ import annotations

import gzip
import io
import json
import os
import secrets
import zlib
from functools import lru_cache
from importlib import resources
from pathlib import Path

from steplog.checks import CheckError, check_records
from steplog.schemacheck import compile_schema, explain
from steplog.strict_json import JSONLineError, parse_line

SCHEMA_VERSION = 1  # what Batchscope's own engine writes
SCHEMA_VERSIONS = (1, 2)  # what this reader accepts
MAX_TRACE_BYTES = 200 * 1024 * 1024  # uncompressed; the vLLM tracer's default cap (BATCHSCOPE_TRACE_MAX_MB=200)
GZIP_MAGIC = b"\x1f\x8b"


class TraceError(ValueError):
    """A trace that is malformed, truncated, too large, of another schema version, or fails the schema."""


def schema_text() -> str:
    """The JSON Schema of trace files, read from the installed package."""
    return resources.files("steplog").joinpath("trace.schema.json").read_text(encoding="utf-8")


@lru_cache(maxsize=1)
def _schema() -> dict:
    return json.loads(schema_text())


@lru_cache(maxsize=1)
def _checks():
    """Compiled predicates per record kind (``step_v1``, ``step_v2``: the step of each schema version)."""
    return {kind: compile_schema(_schema(), kind) for kind in ("header", "step_v1", "step_v2", "summary")}


@lru_cache(maxsize=1)
def _validators():
    import jsonschema

    defs = _schema()["$defs"]
    return {kind: jsonschema.Draft202012Validator({**defs[kind], "$defs": defs}) for kind in _checks()}


def _problem(kind: str, rec: dict) -> str | None:
    """None if ``rec`` is a valid ``kind`` record, else the first problem as ``"field PATH: message"``."""
    if _checks()[kind](rec):
        return None
    try:
        error = next(iter(_validators()[kind].iter_errors(rec)), None)
    except ImportError:  # jsonschema missing (e.g. in vLLM's venv): the slow interpreter names the problem
        found = explain(_schema(), kind, rec)
        return None if found is None else f"field {found}"
    if error is None:
        return None  # the compiled check is stricter only on integer-valued floats; jsonschema decides
    return f"field {'/'.join(map(str, error.absolute_path)) or '(record)'}: {error.message[:300]}"


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
    if version not in SCHEMA_VERSIONS:
        raise TraceError(f"line 1: schema_version={version!r}; this Batchscope reads versions 1 and 2")
    if records[-1].get("type") != "summary":
        raise TraceError(f"line {len(records)}: the last record must have type 'summary' (truncated trace?)")
    for i, rec in enumerate(records, start=1):
        kind = rec.get("type")
        expected = "header" if i == 1 else "summary" if i == len(records) else "step"
        if kind != expected:
            raise TraceError(f"line {i}: type={kind!r}, expected {expected!r}")
        problem = _problem(f"step_v{version}" if kind == "step" else kind, rec)
        if problem is not None:
            raise TraceError(f"line {i} ({kind}), {problem}")
        if kind == "step" and "block_tables" in rec["kv"]:
            _check_kv(rec["kv"], i)

    try:
        check_records(records)
    except CheckError as exc:
        raise TraceError(str(exc)) from None


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
    """Records as JSON Lines text (validated first; never ``NaN`` or ``Infinity``)."""
    validate_records(records)
    return "".join(
        json.dumps(rec, ensure_ascii=False, separators=(",", ":"), allow_nan=False) + "\n" for rec in records
    )


def write_bytes_atomic(data: bytes, path: str | Path) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder and a rename: a reader (or a crash)
    sees the old file or the new one, never half of one. The file gets the mode any new file of the user gets
    (0666 less the umask: 0644 under umask 022), not ``mkstemp``'s 0600, so an exported page can be served."""
    p = Path(path)
    while True:
        tmp = p.parent / f".{p.name}.{secrets.token_hex(6)}.tmp"
        try:  # O_EXCL: a name of our own; mode 0o666, which the kernel narrows by the umask
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
            break
        except FileExistsError:
            continue
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, p)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text_atomic(text: str, path: str | Path) -> None:
    """``write_bytes_atomic`` of UTF-8 text."""
    write_bytes_atomic(text.encode("utf-8"), path)


def write(records: list[dict], path: str | Path) -> None:
    """Validate and write a trace file, atomically (gzip-compressed if the name ends in ``.gz``)."""
    data = dumps(records).encode("utf-8")
    write_bytes_atomic(gzip.compress(data, compresslevel=6) if str(path).endswith(".gz") else data, path)


def _mb(n: int) -> str:
    return f"{n / 2**20:.1f} MB" if n >= 10 * 2**20 else f"{n / 2**20:.3f} MB"


def decompress(data: bytes, limit: int | None = None) -> bytes:
    """The uncompressed bytes of gzip ``data``, refusing (``TraceError``) beyond ``limit`` bytes of uncompressed
    text without inflating more than that (a small file can expand enormously). Default: ``MAX_TRACE_BYTES``."""
    limit = MAX_TRACE_BYTES if limit is None else limit
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as f:
            out = f.read(limit + 1)
    except (OSError, EOFError, zlib.error) as exc:
        raise TraceError(f"trace is not valid gzip data ({exc})") from None
    if len(out) > limit:
        raise TraceError(f"trace is over {_mb(limit)} uncompressed; the limit is {_mb(limit)} of uncompressed text")
    return out


def loads(text: str | bytes) -> list[dict]:
    """Parse and validate JSON Lines text (bytes may be gzip data). Raises ``TraceError`` with the line number of
    any problem, or the size limit (of the uncompressed text) when it is exceeded."""
    if isinstance(text, bytes) and text[:2] == GZIP_MAGIC:
        text = decompress(text)
    if len(text) > MAX_TRACE_BYTES:
        raise TraceError(f"trace is {_mb(len(text))}; the limit is {_mb(MAX_TRACE_BYTES)} of uncompressed text")
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
    """Read and validate a trace file (``.jsonl`` or ``.jsonl.gz``)."""
    p = Path(path)
    if p.is_dir():
        raise TraceError(f"{p} is a folder, not a trace file")
    if p.stat().st_size > MAX_TRACE_BYTES:
        raise TraceError(f"{p.name} is {_mb(p.stat().st_size)}; the limit is {_mb(MAX_TRACE_BYTES)}")
    return loads(p.read_bytes())
