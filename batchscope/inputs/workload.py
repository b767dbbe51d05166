"""Workloads: request specs from JSON Lines files and scenarios, turned into ``Request`` objects.

A workload line is one request::

    {"request_id": "A", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 32,
     "temperature": 0, "top_p": 1.0, "top_k": 0, "seed": null, "ignore_eos": false, "arrival_time": 0.0}

Exactly one of ``prompt`` (plain text), ``messages`` (chat, rendered with the model's chat template) or
``prompt_token_ids`` is required; ``max_tokens`` is required; the rest is optional. ``arrival_time`` is in seconds
from the start of the run; ``arrival_step`` makes the request arrive before that step instead (the step clock, for
reproducible demos; give one of the two). ``abort_step`` (optional): the request is aborted before that step is
scheduled, whatever its state (or when it arrives, if later), as a server aborts a request whose client went away.
``priority`` (optional, a 64-bit signed integer, default 0): lower runs first under the ``priority`` scheduling policy;
the FCFS policy ignores it (with a warning). Every field is checked strictly before a model loads
(``batchscope.inputs.spec``). A scenario (``batchscope/inputs/scenarios/NAME.json``, package data) is ``{"name",
"description", "config": {...}, "requests": [lines as above], "tour": [key moments by kind,
batchscope.explain.moments]}``.

The workload generators live here too, so the engine, the benchmark tools and the app share one copy:
``poisson_arrivals`` (seeded arrival times) and ``output_lengths`` (seeded log-normal lengths with an exact mean).
"""

from __future__ import annotations

import json
import math
import statistics
from importlib import resources
from pathlib import Path

import numpy as np

from batchscope.engine.request import Request, SamplingParams, int_in_range
from batchscope.inputs.spec import FIELDS, INT_FIELDS, WorkloadError, parse_spec
from batchscope.steplog.strict_json import JSONLineError, parse_line

MAX_WORKLOAD_BYTES = 50 * 1024 * 1024


def read_workload(path: str | Path) -> list[dict]:
    """Read a JSON Lines workload file, every line checked strictly (``batchscope.inputs.spec``) and ids unique, before
    any model loads. Lines without ``request_id`` get ``r0``, ``r1``, ... in file order.

    Raises:
        WorkloadError: naming the file, the line and the field.
    """
    p = Path(path)
    if p.is_dir():
        raise WorkloadError(f"workload {str(p)!r} is a folder; give a JSON Lines file, one request per line")
    if not p.is_file():
        raise WorkloadError(f"workload file {str(p)!r} does not exist")
    if p.stat().st_size > MAX_WORKLOAD_BYTES:
        raise WorkloadError(f"workload file {p.name} is {p.stat().st_size / 1e6:.1f} MB; the limit is 50 MB")
    try:
        text = p.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise WorkloadError(f"workload file {p.name} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return parse_workload_text(text, p.name)


def parse_workload_text(text: str, name: str = "workload") -> list[dict]:
    """The request specs of JSON Lines ``text`` (see ``read_workload``); messages say ``{name} line {i}``."""
    specs: list[dict] = []
    lines: dict[str, int] = {}
    for i, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{name} line {i}"
        try:
            obj = parse_line(line, where)
        except JSONLineError as exc:
            raise WorkloadError(_line_problem(exc, where)) from None
        spec = parse_spec(obj, where)
        spec.setdefault("request_id", f"r{len(specs)}")
        rid = spec["request_id"]
        if rid in lines:
            raise WorkloadError(
                f"{where}, field 'request_id': {rid!r} is already used on line {lines[rid]}; ids must be unique"
            )
        lines[rid] = i
        specs.append(spec)
    if not specs:
        raise WorkloadError(f"workload {name} holds no request")
    return specs


def _line_problem(exc: JSONLineError, where: str) -> str:
    """The reader's refusal, in the field's own words when it refused the number of an integer field (an id of
    ``prompt_token_ids`` with 25 digits: "must be a non-empty list of integer token ids in [0, 2**31 - 1]")."""
    if exc.field in INT_FIELDS or exc.field == "prompt_token_ids":
        return f"{where}, field '{exc.field}': must be {FIELDS[exc.field][1]}, got {exc.token}"
    return str(exc)


def _scenario_files() -> dict[str, str]:
    """Scenario name -> JSON text, from the installed package's ``scenarios`` folder."""
    folder = resources.files("batchscope.inputs").joinpath("scenarios")
    return {
        f.name[: -len(".json")]: f.read_text(encoding="utf-8")
        for f in sorted(folder.iterdir(), key=lambda f: f.name)
        if f.name.endswith(".json")
    }


def list_scenarios() -> dict[str, str]:
    """Scenario name -> one-line description."""
    return {name: json.loads(text)["description"].split("\n")[0] for name, text in _scenario_files().items()}


def load_scenario(name: str) -> dict:
    """The scenario's dict (``config`` overrides and checked ``requests``). Raises ``WorkloadError``."""
    files = _scenario_files()
    if name not in files:
        raise WorkloadError(f"scenario {name!r} does not exist; choose one of: {', '.join(files)}")
    data = json.loads(files[name])
    data["requests"] = [parse_spec(r, f"scenario {name} request {i}") for i, r in enumerate(data["requests"])]
    return data


def scenario_tour(name: str | None) -> list[dict] | None:
    """The tour of shipped scenario ``name`` (its ``tour``: moments by kind, ``batchscope.explain.moments``), or None
    when ``name`` is not a shipped scenario or it has none."""
    text = _scenario_files().get(name or "")
    return json.loads(text).get("tour") if text else None


def render_prompt(spec: dict, tokenizer) -> tuple[str, list[int]]:
    """(display text, token ids) of a spec's prompt; chat messages go through the model's chat template."""
    if "prompt_token_ids" in spec:
        ids = list(spec["prompt_token_ids"])
        bad = next((i for i, t in enumerate(ids) if not int_in_range(t, "prompt_token_ids")), None)
        if bad is not None:  # a spec given in Python, not read from a file: the tokenizer's u32 would overflow
            raise WorkloadError(
                f"request {spec.get('request_id')!r}, field 'prompt_token_ids': must be "
                f"{FIELDS['prompt_token_ids'][1]}, got prompt_token_ids[{bad}] = {ids[bad]!r}"
            )
        return (tokenizer.decode(ids) if tokenizer else " ".join(map(str, ids))), ids
    if tokenizer is None:
        raise WorkloadError("a text prompt needs a tokenizer; this model has none (use prompt_token_ids)")
    if "messages" in spec:
        if not getattr(tokenizer, "chat_template", None):
            raise WorkloadError(
                f"request {spec.get('request_id')!r}: 'messages' needs a chat template; this model has none"
            )
        text = tokenizer.apply_chat_template(spec["messages"], add_generation_prompt=True, tokenize=False)
    else:
        text = spec["prompt"]
    return text, tokenizer(text, add_special_tokens=False).input_ids


def to_requests(specs: list[dict], tokenizer) -> list[Request]:
    """Build fresh ``Request`` objects (each run needs its own: requests carry their progress)."""
    requests = []
    for i, spec in enumerate(specs):
        text, ids = render_prompt(spec, tokenizer)
        sampling = SamplingParams(
            temperature=spec.get("temperature", 0.0),
            top_p=spec.get("top_p", 1.0),
            top_k=spec.get("top_k", 0),
            seed=spec.get("seed"),
            max_tokens=spec["max_tokens"],
            ignore_eos=bool(spec.get("ignore_eos", False)),
        )
        requests.append(
            Request(
                str(spec.get("request_id", f"r{i}")),
                ids,
                sampling,
                prompt=text,
                arrival_time=spec.get("arrival_time", 0.0),
                arrival_step=spec.get("arrival_step"),
                priority=spec.get("priority", 0),
                abort_step=spec.get("abort_step"),
            )
        )
    return requests


# -- generators ------------------------------------------------------------------------------------------------


def poisson_arrivals(specs: list[dict], rate: float, seed: int = 0, clock: str = "s") -> list[dict]:
    """Copies of ``specs`` with seeded Poisson arrivals, in the given order.

    Inter-arrival gaps are exponential with mean ``1 / rate`` (numpy ``default_rng(seed)``); as in vLLM's serving
    benchmark the first request arrives at 0 and request ``i`` after the first ``i`` gaps.

    Args:
        rate: requests per second (``clock="s"``: sets ``arrival_time`` in seconds) or requests per step
            (``clock="steps"``: sets ``arrival_step`` = floor of the arrival on the step clock, reproducible).
            ``math.inf`` makes every request arrive at 0.
        seed: the same seed always gives the same arrivals.
    Raises:
        ValueError: ``rate`` not > 0, or ``clock`` not ``"s"`` / ``"steps"``.
    """
    if not (isinstance(rate, (int, float)) and rate > 0):
        raise ValueError(f"rate={rate!r} must be > 0 requests per {'second' if clock == 's' else 'step'}")
    if clock not in ("s", "steps"):
        raise ValueError(f"clock={clock!r} must be 's' (seconds) or 'steps'")
    gaps = np.zeros(len(specs)) if math.isinf(rate) else np.random.default_rng(seed).exponential(1 / rate, len(specs))
    gaps[:1] = 0.0
    times = np.cumsum(gaps)
    out = []
    for spec, t in zip(specs, times):
        new = {k: v for k, v in spec.items() if k not in ("arrival_time", "arrival_step")}
        if clock == "s":
            new["arrival_time"] = float(t)
        else:
            new["arrival_step"] = math.floor(t)
        out.append(new)
    return out


def output_lengths(n: int, mean: int, sigma: float, seed: int = 0, cap_factor: float = 8.0) -> list[int]:
    """``n`` output lengths (tokens) with sample mean exactly ``mean``, between 1 and ``cap_factor * mean``.

    The lengths follow a log-normal distribution with shape ``sigma`` (the spread level: 0 gives ``n`` equal
    lengths; the coefficient of variation grows as ``sqrt(exp(sigma**2) - 1)``), cut at ``[1, cap_factor * mean]``
    and scaled so that its mean stays ``mean``. Draws are stratified (one per ``1/n`` quantile band, so a small ``n``
    still covers the tail), rounded so that the sum is exactly ``n * mean``, then shuffled: the seed decides which
    request gets which length.

    Raises:
        ValueError: ``n < 1``, ``mean < 1``, ``sigma < 0`` or ``cap_factor < 1``.
    """
    if n < 1 or mean < 1 or sigma < 0 or cap_factor < 1:
        raise ValueError(
            f"need n >= 1, mean >= 1, sigma >= 0 and cap_factor >= 1 "
            f"(got n={n}, mean={mean}, sigma={sigma}, cap_factor={cap_factor})"
        )
    cap = max(mean, math.floor(cap_factor * mean))
    if sigma == 0 or cap == mean or mean == 1:
        return [mean] * n
    rng = np.random.default_rng(seed)
    u = (np.arange(n) + rng.uniform(size=n)) / n  # one draw per quantile band
    raw = np.exp(sigma * np.asarray([statistics.NormalDist().inv_cdf(v) for v in u]))

    def mean_at(k: float) -> float:
        return float(np.clip(k * raw, 1, cap).mean())

    lo, hi = 0.0, float(cap) / raw.min()  # mean_at rises with k: bisect for mean_at(k) == mean
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if mean_at(mid) < mean else (lo, mid)
    x = np.clip(hi * raw, 1, cap)
    lengths = np.floor(x).astype(int)
    need = n * mean - int(lengths.sum())  # |need| <= n after the bisection: hand out the remainders
    step = 1 if need > 0 else -1
    for i in np.argsort(-step * (x - lengths), kind="stable"):
        if need == 0:
            break
        if 1 <= lengths[i] + step <= cap:
            lengths[i] += step
            need -= step
    rng.shuffle(lengths)
    return [int(v) for v in lengths]
