"""The names the player's gauges give an SGLang trace are SGLang 0.5.23's own: every ``sglang:`` name of
``batchscope.steplog.metric_names.SGLANG`` (read as text, without importing the project) is created, as the kind our
words give it (gauge, counter, histogram), in SGLang's installed metrics collector
(sglang/srt/observability/metrics_collector.py); a renamed or retyped metric fails here. Only the standard library
and SGLang are used."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import sglang

ROOT = Path(__file__).resolve().parents[1]
COLLECTOR = Path(sglang.__file__).parent / "srt" / "observability" / "metrics_collector.py"
KINDS = {"Gauge": "gauge", "Counter": "counter", "Histogram": "histogram"}


def table(name: str) -> dict[str, tuple[str, str, str]]:
    """The literal assigned to ``name`` in batchscope/steplog/metric_names.py."""
    tree = ast.parse((ROOT / "batchscope" / "steplog" / "metric_names.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
            assert node.value is not None
            return ast.literal_eval(node.value)
    raise AssertionError(f"no {name} in batchscope/steplog/metric_names.py")


def exported() -> dict[str, str]:
    """Every metric SGLang's collector creates: name -> gauge, counter or histogram (the constructor it is given to)."""
    found = {}
    made = re.compile(
        r"\b(Gauge|Counter|Histogram)\(\s*(?:#[^\n]*\n\s*)*name=\"(sglang:[a-zA-Z_:]+)\""
    )  # comments between
    for kind, name in made.findall(COLLECTOR.read_text()):
        found[name] = KINDS[kind]
    return found


def test_every_sglang_name_is_one_sglang_exports_as_that_kind():
    assert sglang.__version__ == "0.5.23"
    theirs = exported()
    assert len(theirs) > 50  # the pattern reads the file: SGLang creates many
    ours = table("SGLANG")
    for key, (name, observes, _figure) in ours.items():
        assert name in theirs, f"{key}: {name} is not created in {COLLECTOR}"
        assert observes.startswith(theirs[name]), f"{key}: {name} is a {theirs[name]} in SGLang, ours: {observes!r}"
    assert {"running", "waiting", "kv_usage", "hit_rate", "preemptions", "step_tokens"} <= set(ours)


def test_a_renamed_metric_would_fail():
    theirs = exported()
    assert "sglang:num_running_reqs" in theirs and "sglang:num_running_requests" not in theirs
    assert theirs["sglang:token_usage"] == "gauge" and theirs["sglang:num_retracted_requests_total"] == "counter"


def test_no_vllm_name_in_the_sglang_table_and_no_sglang_name_in_vllms():
    assert all(name.startswith("sglang:") for name, _, _ in table("SGLANG").values())
    assert not any(name.startswith("sglang:") for name, _, _ in table("VLLM").values())
