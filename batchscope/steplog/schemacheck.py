"""A fast, standard-library-only check of records against ``trace.schema.json``.

``jsonschema`` takes 7-11 ms per step record of a busy server's trace (64 running requests, 100 waiting): close to
a minute for 5,000 steps. ``compile_schema`` turns the same schema, once, into plain Python predicates (lists of ids
and token ids are checked by C-level set, min and max calls) that answer valid / not valid about 50 times faster;
``explain`` walks the schema slowly to name the first problem of a record the predicate refused. Both implement the
keywords the schema uses, with draft 2020-12's meaning (an integer-valued float is an integer, a bool is not a
number), and refuse a schema with any other keyword, so they never silently accept what ``jsonschema`` would refuse
(``tests/steplog/test_schemacheck.py`` holds them to its answers).

    valid = compile_schema(schema, "step_v2")
    if not valid(record): print(explain(schema, "step_v2", record))   # "scheduled/0/kind: 'warmup' is not one of"
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

Predicate = Callable[[Any], bool]
ANNOTATIONS = {"description", "title", "$schema", "$id", "$comment", "default", "examples", "$defs"}
KEYWORDS = {
    "type",
    "const",
    "enum",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "pattern",
    "$ref",
    "allOf",
    "anyOf",
    "if",
    "then",
    "else",
    "propertyNames",
}
_PY_TYPES = {"object": (dict,), "array": (list,), "string": (str,), "boolean": (bool,), "number": (int, float)}
_BOUNDS = {
    "minimum": (lambda v, b: v >= b, "is less than the minimum of"),
    "maximum": (lambda v, b: v <= b, "is greater than the maximum of"),
    "exclusiveMinimum": (lambda v, b: v > b, "is less than or equal to the minimum of"),
    "exclusiveMaximum": (lambda v, b: v < b, "is greater than or equal to the maximum of"),
}


def is_type(value: Any, name: str) -> bool:
    """JSON Schema's ``type`` test (draft 2020-12)."""
    if name == "integer":
        return type(value) is int or (type(value) is float and value.is_integer())
    if name == "null":
        return value is None
    return type(value) in _PY_TYPES[name]


def _same(a: Any, b: Any) -> bool:
    """JSON equality for const and enum: 1 == 1.0, but true is not 1."""
    return a is b or (a == b and type(a) is not bool and type(b) is not bool)


def _check_keywords(schema: dict) -> None:
    if unknown := set(schema) - ANNOTATIONS - KEYWORDS:
        raise ValueError(f"batchscope.steplog.schemacheck does not implement {sorted(unknown)}")


def _resolve(root: dict, schema: dict) -> dict:
    while set(schema) - ANNOTATIONS == {"$ref"}:
        schema = root["$defs"][schema["$ref"].removeprefix("#/$defs/")]
    return schema


def _fast_list(root: dict, item: dict) -> Predicate | None:
    """C-speed checks for the two big kinds of arrays: ids (non-empty strings) and token or block ids (bounded ints)."""
    item = {k: v for k, v in _resolve(root, item).items() if k not in ANNOTATIONS}
    if item == {"type": "string", "minLength": 1}:
        return lambda v: not v or (set(map(type, v)) == {str} and "" not in v)
    if set(item) == {"type", "minimum", "maximum"} and item["type"] == "integer":
        lo, hi = item["minimum"], item["maximum"]
        return lambda v: not v or (set(map(type, v)) == {int} and lo <= min(v) and max(v) <= hi)
    return None


def _common_leaf(schema: dict) -> Predicate | None:
    """One-call predicates for the leaf shapes that fill a trace: ids, counts, seconds, kinds."""
    keys = set(schema) - ANNOTATIONS
    kind = schema.get("type")
    if keys == {"type", "minLength"} and kind == "string":
        n = schema["minLength"]
        return lambda v: type(v) is str and len(v) >= n
    if keys == {"type", "minimum", "maximum"} and kind == "integer":
        lo, hi = schema["minimum"], schema["maximum"]
        return lambda v: (type(v) is int or (type(v) is float and v.is_integer())) and lo <= v <= hi
    if keys == {"type", "minimum"} and kind == "number":
        b = schema["minimum"]
        return lambda v: type(v) in (int, float) and v >= b
    if keys == {"enum"} and all(type(o) is str for o in schema["enum"]):
        options = frozenset(schema["enum"])
        return lambda v: type(v) is str and v in options
    return None


def _leaf(schema: dict) -> list[Predicate]:
    """Predicates for the keywords that look at one value alone."""
    common = _common_leaf(schema)
    if common is not None:
        return [common]
    out: list[Predicate] = []
    if "type" in schema:
        names = [schema["type"]] if isinstance(schema["type"], str) else list(schema["type"])
        out.append(_any([_type_predicate(n) for n in names]))
    if "const" in schema:
        out.append(_equal_to_one_of((schema["const"],)))
    if "enum" in schema:
        out.append(_equal_to_one_of(tuple(schema["enum"])))
    for key, (test, _) in _BOUNDS.items():
        if key in schema:
            out.append(_bounded(test, schema[key]))
    for key, kind, at_least in (
        ("minLength", str, True),
        ("maxLength", str, False),
        ("minItems", list, True),
        ("maxItems", list, False),
    ):
        if key in schema:
            out.append(_sized(kind, schema[key], at_least))
    if "pattern" in schema:
        out.append(_matching(re.compile(schema["pattern"])))
    return out


def _equal_to_one_of(options: tuple) -> Predicate:
    return lambda v: any(_same(v, o) for o in options)


def _bounded(test: Callable[[Any, Any], bool], bound: Any) -> Predicate:
    return lambda v: type(v) not in (int, float) or test(v, bound)


def _sized(kind: type[str] | type[list], n: int, at_least: bool) -> Predicate:
    if at_least:
        return lambda v: not isinstance(v, (str, list)) or type(v) is not kind or len(v) >= n
    return lambda v: not isinstance(v, (str, list)) or type(v) is not kind or len(v) <= n


def _matching(rx: re.Pattern) -> Predicate:
    return lambda v: type(v) is not str or bool(rx.search(v))


def _type_predicate(name: str) -> Predicate:
    if name == "integer":
        return lambda v: type(v) is int or (type(v) is float and v.is_integer())
    if name == "null":
        return lambda v: v is None
    types = _PY_TYPES[name]
    return lambda v: type(v) in types


def _all(preds: list[Predicate]) -> Predicate:
    if len(preds) == 1:
        return preds[0]
    if len(preds) == 2:
        a, b = preds
        return lambda v: a(v) and b(v)
    return lambda v: all(p(v) for p in preds)


def _any(preds: list[Predicate]) -> Predicate:
    if len(preds) == 1:
        return preds[0]
    return lambda v: any(p(v) for p in preds)


def _object(root: dict, schema: dict, compile_: Callable[[dict], Predicate]) -> Predicate:
    props = schema.get("properties", {})
    pairs = tuple((k, compile_(s)) for k, s in props.items())
    required = tuple(schema.get("required", ()))
    extra = schema.get("additionalProperties", True)
    extra_ok = compile_(extra) if isinstance(extra, dict) else None
    names_ok = compile_(schema["propertyNames"]) if "propertyNames" in schema else None
    missing = object()

    def check(v: Any) -> bool:
        if type(v) is not dict:
            return True  # "type" decides whether it must be an object
        if not all(map(v.__contains__, required)):
            return False
        if names_ok is not None and not all(map(names_ok, v)):
            return False
        for k, ok in pairs:
            x = v.get(k, missing)
            if x is not missing and not ok(x):
                return False
        if extra is False and not props.keys() >= v.keys():
            return False
        return extra_ok is None or all(extra_ok(x) for k, x in v.items() if k not in props)

    return check


def compile_schema(root: dict, definition: str) -> Predicate:
    """A predicate for ``root["$defs"][definition]``: True if the value is valid."""
    cache: dict[int, Predicate] = {}

    def compile_(schema: dict | bool) -> Predicate:
        if schema is True or schema == {}:
            return lambda v: True
        if schema is False:
            return lambda v: False
        assert isinstance(schema, dict)
        if id(schema) in cache:
            return cache[id(schema)]
        _check_keywords(schema)
        schema_ = _resolve(root, schema)
        if schema_ is not schema:
            return compile_(schema_)
        preds = _leaf(schema)
        if "$ref" in schema:
            preds.append(compile_(_resolve(root, {"$ref": schema["$ref"]})))
        if {"properties", "required", "additionalProperties"} & set(schema):
            preds.append(_object(root, schema, compile_))
        if "items" in schema:
            fast = _fast_list(root, schema["items"])
            item = compile_(schema["items"])
            preds.append(fast or (lambda v: type(v) is not list or all(map(item, v))))
        if "allOf" in schema:
            preds.append(_all([compile_(s) for s in schema["allOf"]]))
        if "anyOf" in schema:
            preds.append(_any([compile_(s) for s in schema["anyOf"]]))
        if "if" in schema:
            cond, then, other = (compile_(schema.get(k, True)) for k in ("if", "then", "else"))
            preds.append(lambda v: then(v) if cond(v) else other(v))
        pred = _all(preds)
        cache[id(schema)] = pred
        return pred

    return compile_(root["$defs"][definition])


def explain(root: dict, definition: str, value: Any) -> str | None:
    """The first problem of ``value`` against ``root["$defs"][definition]`` as ``"field a/b: message"`` or
    ``"(record): message"``; None if it is valid. Slow (an interpreter): call it after ``compile_schema``'s
    predicate said no."""
    problem = _explain(root, root["$defs"][definition], value, [])
    if problem is None:
        return None
    path, message = problem
    return f"{'/'.join(map(str, path)) or '(record)'}: {message}"


def _explain(root: dict, schema: Any, v: Any, path: list) -> tuple[list, str] | None:
    if schema is True or schema == {}:
        return None
    if schema is False:
        return path, "no value is allowed here"
    _check_keywords(schema)
    if "$ref" in schema:
        found = _explain(root, _resolve(root, {"$ref": schema["$ref"]}), v, path)
        if found:
            return found
    if "type" in schema:
        names = [schema["type"]] if isinstance(schema["type"], str) else schema["type"]
        if not any(is_type(v, n) for n in names):
            return path, f"{v!r:.80} is not of type {', '.join(map(repr, names))}"
    if "const" in schema and not _same(v, schema["const"]):
        return path, f"{schema['const']!r} was expected"
    if "enum" in schema and not any(_same(v, o) for o in schema["enum"]):
        return path, f"{v!r:.80} is not one of {schema['enum']}"
    for key, (test, words) in _BOUNDS.items():
        if key in schema and type(v) in (int, float) and not test(v, schema[key]):
            return path, f"{v!r} {words} {schema[key]}"
    for key, kind, bad, words in (
        ("minLength", str, lambda n, b: n < b, "is too short"),
        ("maxLength", str, lambda n, b: n > b, "is too long"),
        ("minItems", list, lambda n, b: n < b, "is too short"),
        ("maxItems", list, lambda n, b: n > b, "is too long"),
    ):
        if key in schema and type(v) is kind and bad(len(v), schema[key]):
            return path, f"{v!r:.80} {words} ({key} {schema[key]})"
    if "pattern" in schema and type(v) is str and not re.search(schema["pattern"], v):
        return path, f"{v!r:.80} does not match {schema['pattern']!r}"
    if type(v) is dict:
        for k in schema.get("required", ()):
            if k not in v:
                return path, f"{k!r} is a required property"
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for k, x in v.items():
            if "propertyNames" in schema and _explain(root, schema["propertyNames"], k, [*path, k]):
                return [*path, k], f"the key {k!r:.80} is not allowed here"
            found = _explain(root, props.get(k, extra), x, [*path, k])
            if found and k not in props and extra is False:
                return path, f"additional property {k!r} is not allowed"
            if found:
                return found
    if type(v) is list and "items" in schema:
        for i, x in enumerate(v):
            found = _explain(root, schema["items"], x, [*path, i])
            if found:
                return found
    return _explain_combined(root, schema, v, path)


def _explain_combined(root: dict, schema: dict, v: Any, path: list) -> tuple[list, str] | None:
    for sub in schema.get("allOf", ()):
        found = _explain(root, sub, v, path)
        if found:
            return found
    if "anyOf" in schema and all(_explain(root, s, v, path) for s in schema["anyOf"]):
        return path, f"{v!r:.80} is not valid under any of the given schemas"
    if "if" in schema:
        branch = "then" if _explain(root, schema["if"], v, path) is None else "else"
        if branch in schema:
            return _explain(root, schema[branch], v, path)
    return None
