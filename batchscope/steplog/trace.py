"""The step log (trace): JSON Lines, one header, one record per step, one summary.

The format is documented in ``docs/trace-format.md`` and pinned by the JSON Schema
``batchscope/steplog/trace.schema.json`` (package data); every trace written or read here is validated against it: read
by msgspec decoders made from it (``batchscope.steplog.fastread``), else, and to name a problem,
``batchscope.steplog.schemacheck``'s check and ``jsonschema``. Versions 1 (every block table in every step) and 2 (what
changed: ``kv.allocated``, ``kv.freed``) are read; a path or text that is gzip data (``.jsonl.gz``) is decompressed
transparently, and the size limit applies to the uncompressed text. Traces are plain data: never pickle, never eval.

Reading is strict and bounded (``batchscope.steplog.strict_json``: no ``NaN`` or ``Infinity``, no 1000-digit integers,
no deep nesting, no endless line) and then checks what the schema cannot (``batchscope.steplog.checks``: finite numbers,
time that never runs backwards, ids, slots and blocks that exist), so that every trace read here can be measured and
drawn. A trace cut short (a server killed before its summary line, a ``.gz`` without its trailer) opens with its
complete steps and the summary ``batchscope.steplog.cutshort`` makes for it, marked ``cut_short``; a bad line anywhere
else is refused. Writing never emits a non-finite number and replaces the file atomically (a temporary file in the same
folder, then a rename).
"""

from __future__ import annotations

import gzip
import json
import os
import secrets
import zlib
from functools import lru_cache
from importlib import resources
from pathlib import Path

from batchscope.steplog.checks import CheckError, check_records
from batchscope.steplog.cutshort import cut_short_summary
from batchscope.steplog.fastread import parse as fast_parse
from batchscope.steplog.schemacheck import compile_schema, explain
from batchscope.steplog.spec_decode import infer_drafts
from batchscope.steplog.strict_json import JSONLineError, is_cut, parse_line
from batchscope.steplog.view import declared_requests

SCHEMA_VERSION = 1  # what Batchscope's own engine writes
SCHEMA_VERSIONS = (1, 2)  # what this reader accepts
MAX_TRACE_BYTES = 200 * 1024 * 1024  # uncompressed; the vLLM tracer's default cap (BATCHSCOPE_TRACE_MAX_MB=200)
GZIP_MAGIC = b"\x1f\x8b"


class TraceError(ValueError):
    """A trace that is malformed, truncated, too large, of another schema version, or fails the schema."""


def schema_text() -> str:
    """The JSON Schema of trace files, read from the installed package."""
    return resources.files("batchscope.steplog").joinpath("trace.schema.json").read_text(encoding="utf-8")


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
    message = error.message[:300]
    if error.validator in ("minLength", "maxLength") and isinstance(error.instance, str):  # say the range
        lo, hi = error.schema.get("minLength", 0), error.schema.get("maxLength")
        message = f"{len(error.instance)} characters; must be " + (f"{lo}-{hi}" if hi is not None else f">= {lo}")
    return f"field {'/'.join(map(str, error.absolute_path)) or '(record)'}: {message}"


def validate_records(records: list[dict], cut_short: bool = False, decoded: bool = False) -> None:
    """Check order (header, steps, summary) and each record against the schema.

    ``cut_short``: a trace whose last record is a step (its writer stopped before the summary line) is given the
    summary it would have had (``batchscope.steplog.cutshort``, appended to ``records``) instead of being refused.
    ``decoded``: the records come from ``batchscope.steplog.fastread.parse`` (each already valid for its kind, every
    number finite).

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
    complete = records[-1].get("type") == "summary"
    if not complete and not (cut_short and (len(records) == 1 or records[-1].get("type") == "step")):
        raise TraceError(f"line {len(records)}: the last record must have type 'summary' (truncated trace?)")
    last = len(records) if complete else 0
    for i, rec in enumerate(records, start=1):
        kind = rec.get("type")
        expected = "header" if i == 1 else "summary" if i == last else "step"
        if kind != expected:
            raise TraceError(f"line {i}: type={kind!r}, expected {expected!r}")
        problem = None if decoded else _problem(f"step_v{version}" if kind == "step" else kind, rec)
        if problem is not None:
            raise TraceError(f"line {i} ({kind}), {problem}")
        if kind == "step" and "block_tables" in rec["kv"]:
            _check_kv(rec["kv"], i)
    if not complete:
        if len(records) == 1:
            raise TraceError("line 2: the trace was cut short before its first complete step: nothing to draw")
        header, steps = records[0], records[1:]
        records.append(cut_short_summary(header, steps, declared_requests(header, steps)))
    try:
        check_records(records, finite=decoded)
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
    """The uncompressed bytes of gzip ``data``; of a file that ends before the gzip end-of-stream trailer (as a
    killed writer leaves it), what was decoded before that (the reader keeps its complete lines). Refuses
    (``TraceError``) corrupt data (a wrong CRC-32 included), and data beyond ``limit`` bytes of uncompressed text
    without inflating more than that (a small file can expand enormously). Default: ``MAX_TRACE_BYTES``."""
    limit = MAX_TRACE_BYTES if limit is None else limit
    out, rest = bytearray(), data
    try:
        while rest:  # one gzip member after another (a concatenated .gz holds several)
            inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
            out += inflater.decompress(rest, limit + 1 - len(out))
            if len(out) > limit:
                raise TraceError(
                    f"trace is over {_mb(limit)} uncompressed; the limit is {_mb(limit)} of uncompressed text"
                )
            if not inflater.eof:  # cut short: no trailer
                break
            rest = inflater.unused_data
    except zlib.error as exc:
        raise TraceError(f"trace is not valid gzip data ({exc})") from None
    return bytes(out)


def _lines(text: str) -> tuple[list[dict], bool]:
    """The records of JSON Lines ``text`` and whether its last line was cut (dropped: it has no line end and is not
    a whole record, as a writer stopped mid-line leaves it). Any other bad line is refused, naming it."""
    records: list[dict] = []
    lines = text.splitlines()
    open_end = bool(lines) and not text.endswith(("\n", "\r"))  # the last line may be cut mid-record
    for i, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            rec = parse_line(line, f"line {i}")
        except JSONLineError as exc:
            if open_end and i == len(lines) and is_cut(line) and not (records and records[-1].get("type") == "summary"):
                return records, True
            raise TraceError(str(exc)) from None
        if not isinstance(rec, dict):
            raise TraceError(f"line {i}: expected a JSON object, got {type(rec).__name__}")
        records.append(rec)
    return records, False


def _decode(data: bytes) -> tuple[str, bool]:
    """UTF-8 text, and whether a last line without its line end was dropped for a character cut in it (a writer
    stopped mid-line); any other byte that is not UTF-8 is refused."""
    try:
        return data.decode("utf-8"), False
    except UnicodeDecodeError as exc:
        end = data.rfind(b"\n") + 1
        if exc.start < end or data.endswith(b"\n"):
            raise TraceError(f"trace is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
        return data[:end].decode("utf-8"), True


def loads(text: str | bytes) -> list[dict]:
    """Parse and validate JSON Lines text (bytes may be gzip data). Raises ``TraceError`` with the line number of
    any problem, or the size limit (of the uncompressed text) when it is exceeded.

    A trace cut short (no summary line; a gzip stream without its trailer; a last line cut mid-record, which is
    dropped) opens with its complete steps and the summary ``batchscope.steplog.cutshort`` gives it, marked
    ``cut_short``."""
    if isinstance(text, bytes) and text[:2] == GZIP_MAGIC:
        text = decompress(text)
    if len(text) > MAX_TRACE_BYTES:
        raise TraceError(f"trace is {_mb(len(text))}; the limit is {_mb(MAX_TRACE_BYTES)} of uncompressed text")
    fast = fast_parse(text, schema_text())
    if fast is None:  # the strict reader: the fast one refused something (it names nothing) or cannot run
        text, dropped = _decode(text) if isinstance(text, bytes) else (text, False)
        records, cut = _lines(text)
    else:
        records, dropped, cut = fast
    if (dropped or cut) and not records:
        raise TraceError("line 1: the trace was cut short inside its header line: nothing to read")
    if dropped and records[-1].get("type") == "summary":
        raise TraceError(f"line {len(records) + 1}: not UTF-8 text after the summary line")
    validate_records(records, cut_short=True, decoded=fast is not None)
    steps = records[1:-1]
    infer_drafts(steps, declared_requests(records[0], steps))  # a server trace without draft ids
    return records


def read(path: str | Path) -> list[dict]:
    """Read and validate a trace file (``.jsonl`` or ``.jsonl.gz``)."""
    p = Path(path)
    if p.is_dir():
        raise TraceError(f"{p} is a folder, not a trace file")
    if p.stat().st_size > MAX_TRACE_BYTES:
        raise TraceError(f"{p.name} is {_mb(p.stat().st_size)}; the limit is {_mb(MAX_TRACE_BYTES)}")
    return loads(p.read_bytes())
