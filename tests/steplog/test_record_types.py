"""One description of the trace format: the record types the code reads (``batchscope.steplog.records``, TypedDicts)
name exactly the fields of the JSON schema the strict reader checks (``trace.schema.json``), required where the
schema requires them; the fields a reader adds and never writes are named here (issue 32, item 6)."""

from __future__ import annotations

import json

import pytest
from conftest import ROOT

from batchscope.steplog import records as R

SCHEMA = json.loads((ROOT / "batchscope" / "steplog" / "trace.schema.json").read_text())["$defs"]
NEVER_IN_A_FILE = {
    "StepRecord": {"idle", "idle_steps"},  # batchscope.steplog.view.on_the_clock: idle steps put back on the clock
    "DecisionsRecord": {"inferred"},  # batchscope.steplog.decisions: decisions rebuilt from the log
}


def _def(d: dict) -> dict:
    while "$ref" in d:
        d = SCHEMA[d["$ref"].rsplit("/", 1)[-1]]
    return _def(d["items"]) if "items" in d else d


STEP, DECISIONS = SCHEMA["step"]["properties"], SCHEMA["decisions"]["properties"]
PAIRS = {
    "RequestSpecRecord": SCHEMA["request"],
    "HeaderRecord": SCHEMA["header"],
    "StepRecord": SCHEMA["step"],
    "DecisionsRecord": SCHEMA["decisions"],
    "SummaryRecord": SCHEMA["summary"],
    "RequestResultRecord": _def(SCHEMA["summary"]["properties"]["requests"]),
    "ScheduledRecord": _def(STEP["scheduled"]),
    "SampledRecord": _def(STEP["sampled"]),
    "FinishedRecord": _def(STEP["finished"]),
    "PaddingRecord": _def(STEP["padding_slots"]),
    "KVRecord": _def(STEP["kv"]),
    "HeadWaitRecord": _def(DECISIONS["head"]),
    "PreemptionRecord": _def(DECISIONS["preemptions"]),
    "AdmissionRecord": _def(DECISIONS["admissions"]),
    "BatchRecord": _def(DECISIONS["batch"]),
}


@pytest.mark.parametrize("name", PAIRS)
def test_each_record_type_names_the_schemas_fields(name):
    td, schema = getattr(R, name), PAIRS[name]
    fields = {k for base in td.__mro__ for k in getattr(base, "__annotations__", {})} - NEVER_IN_A_FILE.get(name, set())
    assert fields == set(schema["properties"]), (name, fields ^ set(schema["properties"]))
    assert set(td.__required_keys__) == set(schema.get("required", ())), name
