"""The fast path of the trace reader: msgspec decoders made from ``trace.schema.json`` itself.

``decoders(schema)`` turns the schema's ``header``, ``step_v1``, ``step_v2`` and ``summary`` into msgspec Struct
types (``msgspec.defstruct``: required fields, ranges as ``msgspec.Meta``, enums as ``Literal``, unknown fields
forbidden), so the one hand-kept description of the format stays the schema and nothing mirrors it by hand. msgspec
validates while it decodes, in C; ``parse`` decodes each line twice, once into the Struct (validation only) and once
into plain dicts and lists (what the rest of the code reads, keys in file order, as ``json.loads`` gives them). Fields
the schema does not name are kept, as the strict reader keeps them, and held to ``strict_json``'s bounds in Python
(integers of at most 19 digits, nesting at most 32 deep), since msgspec only checks that they are JSON.

The fast path is never looser than the strict reader (``batchscope.steplog.strict_json`` +
``batchscope.steplog.schemacheck`` / ``jsonschema``): it refuses more (an integer-valued float such as ``3.0`` where an
integer is due, a lone surrogate, a line with a carriage return or another separator ``str.splitlines`` splits at), and
whenever it refuses anything ``parse`` returns ``None`` and the strict reader reads the whole trace again, accepting it
or naming the line and the field exactly as it always has. What msgspec cannot express, it keeps in Python: the schema's
``if``/``then`` rules (a version 2 header names its ``source``; ``finished[].aborted`` only with reason ``abort``)
are checked on the decoded records with ``batchscope.steplog.schemacheck``'s compiled predicates. Every number the fast
path returns is finite (msgspec refuses ``NaN``, ``Infinity`` and ``1e999``) and every integer lies in its field's range
(at most 64-bit), and no value nests deeper than the schema's types, so ``strict_json``'s bounds hold.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from functools import lru_cache
from typing import Annotated, Any, Literal, Union

from batchscope.steplog.schemacheck import ANNOTATIONS, compile_schema
from batchscope.steplog.strict_json import MAX_DEPTH, MAX_INT_DIGITS, MAX_LINE_CHARS, JSONLineError, is_cut, parse_line

KINDS = ("header", "step_v1", "step_v2", "summary")
# Line breaks of ``str.splitlines`` other than "\n" (the strict reader numbers lines by them): a trace holding any
# of these bytes is read by the strict reader. Only "\r" (JSON whitespace) and U+0085, U+2028, U+2029 (legal unescaped
# in a JSON string) can be in a line msgspec accepts; the others are control characters JSON refuses outside escapes.
OTHER_BREAKS = (b"\r", b"\x0b", b"\x0c", b"\x1c", b"\x1d", b"\x1e", b"\xc2\x85", b"\xe2\x80\xa8", b"\xe2\x80\xa9")
# The id pattern: no control characters. A line without a backslash (no escapes), DEL or a UTF-8 lead byte of
# U+0080-U+009F holds none in any string, so its lines are decoded without the (Python-speed) regex.
CONTROL_FREE = "^[^\\u0000-\\u001F\\u007F-\\u009F]*$"
MAY_HOLD_CONTROLS = (b"\\", b"\x7f", b"\xc2", b"\xe2")
_counter = itertools.count()


class Unsupported(ValueError):
    """A schema construct the converter does not translate (the fast path is then off; the strict reader reads)."""


def _merge(a: dict, b: dict) -> dict:
    """``allOf`` of two object schemas: properties merged (recursively), ``required`` united."""
    out = {k: v for k, v in a.items() if k not in ("properties", "required")}
    for k, v in b.items():
        if k in ("properties", "required") or k in ANNOTATIONS:
            continue
        if k in out and out[k] != v:
            raise Unsupported(f"allOf with two different {k!r}")
        out[k] = v
    props = dict(a.get("properties", {}))
    for k, v in b.get("properties", {}).items():
        props[k] = _merge(props[k], v) if k in props else v
    if props:
        out["properties"] = props
    if "required" in a or "required" in b:
        out["required"] = list(dict.fromkeys([*a.get("required", ()), *b.get("required", ())]))
    return out


class _Converter:
    """Schema -> msgspec type, collecting the ``if``/``then`` rules with the path where each applies."""

    def __init__(self, root: dict, light: bool = False):
        self.root, self.light = root, light  # light: without the CONTROL_FREE pattern
        self.rules: list[tuple[tuple[str, ...], Callable[[Any], bool]]] = []
        self.objects: list[tuple[tuple[str, ...], frozenset[str]]] = []  # where objects are, with their fields

    def resolve(self, schema: dict) -> dict:
        if "$ref" in schema:
            if set(schema) - ANNOTATIONS != {"$ref"}:
                raise Unsupported("$ref beside other keywords")
            return self.resolve(self.root["$defs"][schema["$ref"].removeprefix("#/$defs/")])
        if "allOf" in schema:
            rest = {k: v for k, v in schema.items() if k != "allOf"}
            merged = rest
            for sub in schema["allOf"]:
                merged = _merge(merged, self.resolve(sub))
            return merged
        return schema

    def type_of(self, schema: Any, path: tuple[str, ...]) -> Any:
        if not isinstance(schema, dict):
            raise Unsupported("a boolean schema")
        schema = self.resolve(schema)
        if "if" in schema:
            node = {k: schema[k] for k in ("if", "then", "else") if k in schema}
            self.rules.append((path, compile_schema({"$defs": {**self.root.get("$defs", {}), "_rule": node}}, "_rule")))
            schema = {k: v for k, v in schema.items() if k not in node}
        keys = set(schema) - ANNOTATIONS
        if "anyOf" in schema:
            if keys != {"anyOf"}:
                raise Unsupported("anyOf beside other keywords")
            return Union[tuple(self.type_of(s, path) for s in schema["anyOf"])]  # noqa: UP007
        if "const" in schema or "enum" in schema:
            values = [schema["const"]] if "const" in schema else schema["enum"]
            if keys - {"const", "enum", "type"} or not all(type(v) in (str, int) for v in values):
                raise Unsupported("an enum of values other than strings and integers")
            return Literal[tuple(values)]
        if "type" not in schema:
            raise Unsupported(f"a schema without a type at {'/'.join(path)}")
        names = [schema["type"]] if isinstance(schema["type"], str) else schema["type"]
        types = [t for name in names for t in self.of_type(name, schema, path)]
        return types[0] if len(types) == 1 else Union[tuple(types)]  # noqa: UP007

    def of_type(self, name: str, schema: dict, path: tuple[str, ...]) -> list[Any]:
        import msgspec

        known = {
            "type",
            "minimum",
            "maximum",
            "exclusiveMinimum",
            "exclusiveMaximum",
            "minLength",
            "maxLength",
            "pattern",
            "properties",
            "required",
            "additionalProperties",
            "propertyNames",
            "items",
            "minItems",
            "maxItems",
        }
        if unknown := set(schema) - ANNOTATIONS - known:
            raise Unsupported(f"keywords {sorted(unknown)}")
        bounds = {
            m: schema[j]
            for j, m in (("minimum", "ge"), ("maximum", "le"), ("exclusiveMinimum", "gt"), ("exclusiveMaximum", "lt"))
            if j in schema
        }
        if name in ("integer", "number"):
            types: list[Any] = [Annotated[int, msgspec.Meta(**bounds)] if bounds else int]
            if name == "number":
                types.append(Annotated[float, msgspec.Meta(**bounds)] if bounds else float)
            return types
        if name == "string":
            meta = {
                m: schema[j]
                for j, m in (("minLength", "min_length"), ("maxLength", "max_length"), ("pattern", "pattern"))
                if j in schema
            }
            if self.light and meta.get("pattern") == CONTROL_FREE:
                del meta["pattern"]
            return [Annotated[str, msgspec.Meta(**meta)] if meta else str]
        if name == "boolean":
            return [bool]
        if name == "null":
            return [None]
        if name == "array":
            item = self.type_of(schema.get("items", True), (*path, "*"))
            meta = {m: schema[j] for j, m in (("minItems", "min_length"), ("maxItems", "max_length")) if j in schema}
            return [Annotated[list[item], msgspec.Meta(**meta)] if meta else list[item]]  # type: ignore[valid-type]
        if name == "object":
            return [self.object_type(schema, path)]
        raise Unsupported(f"type {name!r}")

    def object_type(self, schema: dict, path: tuple[str, ...]) -> Any:
        import msgspec

        props, extra = schema.get("properties"), schema.get("additionalProperties", True)
        if props is None and "required" not in schema:  # a map: {key: value}
            if not isinstance(extra, dict):
                raise Unsupported("an object without properties or a value schema")
            key = self.type_of({"type": "string", **schema.get("propertyNames", {})}, path)
            value = self.type_of(extra, (*path, "*"))
            return dict[key, value]  # type: ignore[valid-type]
        if extra is not True or "propertyNames" in schema:
            raise Unsupported("properties beside additionalProperties or propertyNames")
        props, required = props or {}, set(schema.get("required", ()))
        if missing := required - set(props):
            raise Unsupported(f"required fields without a schema: {sorted(missing)}")
        fields: list[Any] = []
        rename: dict[str, str] = {}
        for i, (key, sub) in enumerate(props.items()):
            rename[f"f{i}"] = key
            t = self.type_of(sub, (*path, key))
            fields.append((f"f{i}", t) if key in required else (f"f{i}", t, msgspec.UNSET))
        self.objects.append((path, frozenset(props)))
        name = f"R{next(_counter)}_{'_'.join(path) or 'record'}".replace("*", "item")
        return msgspec.defstruct(name, fields, kw_only=True, rename=rename)


def _at(value: Any, path: tuple[str, ...]) -> list:
    """Every value at ``path`` inside ``value`` (``*``: each item of a list or each value of a map)."""
    level = [value]
    for head in path:
        if head == "*":
            level = [v for x in level for v in (x.values() if type(x) is dict else x)]
        else:
            level = [x[head] for x in level if type(x) is dict and x.get(head) is not None]
    return level


def _bounded(value: Any, depth: int) -> bool:
    """Whether a value the schema does not describe keeps ``strict_json``'s bounds: integers of at most
    ``MAX_INT_DIGITS`` digits, containers nested at most ``MAX_DEPTH`` deep (``depth``: its own, if a container)."""
    if type(value) is int:
        return -(10**MAX_INT_DIGITS) < value < 10**MAX_INT_DIGITS
    if type(value) is dict:
        value = value.values()
    elif type(value) is not list:
        return True
    return depth <= MAX_DEPTH and all(_bounded(v, depth + 1) for v in value)


def _extras_bounded(rec: dict, objects: list[tuple[tuple[str, ...], frozenset[str]]]) -> bool:
    """Whether the fields the schema does not name (msgspec skips them) keep ``strict_json``'s bounds; an object
    at path ``p`` nests ``1 + len(p)`` deep."""
    for path, known in objects:
        objs = _at(rec, path)
        if all(map(known.issuperset, objs)):
            continue
        for obj in objs:
            if not all(_bounded(obj[k], len(path) + 2) for k in obj.keys() - known):
                return False
    return True


@lru_cache(maxsize=4)
def _decoders(schema_text: str) -> dict[str, tuple[Any, Any, list, list]] | None:
    import json

    try:
        import msgspec
    except ImportError:  # e.g. a venv without it: the strict reader reads every trace
        return None
    root = json.loads(schema_text)
    out = {}
    for kind in KINDS:
        conv, light = _Converter(root), _Converter(root, light=True)
        full = msgspec.json.Decoder(conv.type_of(root["$defs"][kind], ()))
        fast = msgspec.json.Decoder(light.type_of(root["$defs"][kind], ()))
        out[kind] = (full, fast, conv.rules, conv.objects)
    return out


def decoders(schema_text: str) -> dict[str, tuple[Any, Any, list, list]] | None:
    """Per record kind, the msgspec decoder made from the schema, the same without the ``CONTROL_FREE`` pattern, its
    ``if``/``then`` rules as (path, predicate) and its objects as (path, the fields the schema names); ``None``
    without msgspec. Raises ``Unsupported`` if the schema uses a construct not translated here."""
    return _decoders(schema_text)


def _record(decs: dict, kinds: tuple[str, ...], line: bytes) -> dict | None:
    """``line`` decoded as the first of ``kinds`` it is valid as (every rule holding), or ``None``."""
    import msgspec

    for kind in kinds:
        full, fast, rules, objects = decs[kind]
        plain = not any(b in line for b in MAY_HOLD_CONTROLS)
        if not plain and any(b in line for b in OTHER_BREAKS[-3:]):
            return None
        try:
            (fast if plain else full).decode(line)
            rec = msgspec.json.decode(line)
        except (msgspec.MsgspecError, RecursionError, ValueError):  # deep nesting: RecursionError
            continue
        if all(all(map(rule, _at(rec, path))) for path, rule in rules) and _extras_bounded(rec, objects):
            return rec
    return None


def parse(text: str | bytes, schema_text: str) -> tuple[list[dict], bool, bool] | None:
    """The records of JSON Lines ``data`` as the strict reader (``batchscope.steplog.trace.loads``) gives them: line 1
    valid as a header, every later line as a step of the header's version or a summary, blank lines skipped; with
    whether a last line without its line end was dropped for a character cut in it, and whether it was dropped for a
    record cut in it: ``(records, dropped, cut)``. ``None``: the strict reader must decide (a line the fast path
    refuses; no msgspec; a schema it does not translate; a str that is not UTF-8, with a lone surrogate)."""
    try:
        decs = decoders(schema_text)
        data = text.encode("utf-8") if isinstance(text, str) else text
    except (Unsupported, UnicodeEncodeError):
        return None
    if decs is None or b"\r" in data:
        return None
    lines = data.split(b"\n")
    tail = lines.pop()  # what follows the last line end ("" when the data ends with one)
    records: list[dict] = []
    step_kind = ""
    for line in lines:
        if not line.strip():
            continue
        rec = _record(decs, (step_kind, "summary") if records else ("header",), line)
        if rec is None or len(line) > MAX_LINE_CHARS:
            return None
        step_kind = step_kind or f"step_v{rec['schema_version']}"
        records.append(rec)
    if not tail.strip():
        return records, False, False
    rec = _record(decs, (step_kind, "summary") if records else ("header",), tail)
    if rec is not None and len(tail) <= MAX_LINE_CHARS:
        return [*records, rec], False, False
    try:
        text = tail.decode("utf-8")
    except UnicodeDecodeError:  # every earlier line is UTF-8 (msgspec checked it): the last line alone is cut
        return records, True, False
    if records and records[-1].get("type") == "summary":
        return None
    try:
        parse_line(text, f"line {len(lines) + 1}")
    except JSONLineError:
        return (records, False, True) if is_cut(text) else None
    return None  # a whole record the fast path refused: the strict reader names its problem
