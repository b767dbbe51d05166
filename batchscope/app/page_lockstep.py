"""Compare runs of one workload in lockstep: static vs continuous by default, or any 2 to 4 traces of the same
requests (recorded under other settings or schedulers, the Playground's live runs, uploads) on one step clock."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from functools import partial

import streamlit as st

from batchscope.app.common import md, query_int, recorded_policies, recorded_view
from batchscope.app.compare import compare, compare_families, compare_pair, compare_runs
from batchscope.app.page_trace import upload_trace
from batchscope.app.state import live_runs
from batchscope.compare.runs import MAX_RUNS, SIDES, config_diff, family_pair, same_workload, same_workloads
from batchscope.explain.stories import default_pair, default_runs
from batchscope.inputs.workload import list_scenarios
from batchscope.steplog.view import TraceView

INTRO = """
The same requests, the same model, the same limits: a **static** batch is formed only when the previous one has
completely finished, so a finished request's row idles as **padding** (grey, ✕) until the slowest member ends;
**continuous** batching hands a finished request's slot and KV blocks to the next waiting request at the very next
step. Run A plays on the left, run B on the right, on one step clock (by default A is static, B continuous).
**Scenario** and **Pair** pick any shipped pair in two clicks (or all four engines of `four-engines`); **Choose
other runs** picks any other two runs of one workload (a Playground run, or an uploaded trace such as your vLLM
server's, against a recorded one) to see what a setting changes, or up to four (**Runs**: sides A, B, C, D), all on
the step clock of the longest run.

**vLLM vs SGLang** puts the same requests under two real schedulers: vLLM's (continuous batching, as above) and
SGLang's, which runs a prefill batch alone while the decodes wait, admits a request only if the pool can hold its
prompt plus its whole output budget beside an estimate of what the running requests will still write, and, when a
decode batch outgrows the pool anyway, retracts a request to the queue instead of preempting; its radix cache finds
shared prompts token by token. Each side's narration says what its scheduler decided and why, from its step log.
"""

# The runs the page opens on, by the run names of a scenario's shipped traces (batchscope.steplog.reasons.run_name),
# runs A, B (C, D) in order; ?pair= in the URL. The Pair picker offers those a scenario ships every run of.
PAIRS = {
    "batching": ("static", "continuous"),
    "schedulers": ("continuous", "sglang"),
    "engines": ("continuous", "sglang", "tgi", "trtllm"),
    "tgi": ("continuous", "tgi"),
    "trtllm": ("continuous", "trtllm"),
    "capacity": ("trtllm", "trtllm_max_utilization"),
    "chunking": ("tgi", "tgi_no_chunking"),
    "speculative": ("continuous", "speculative"),
}
PAIR_NAMES = {
    "batching": "static vs continuous",
    "schedulers": "vLLM vs SGLang",
    "engines": "four engines",
    "tgi": "vLLM vs TGI",
    "trtllm": "vLLM vs TensorRT-LLM",
    "capacity": "TensorRT-LLM: no evict vs max utilization",
    "chunking": "TGI: chunked prefill on vs off",
    "speculative": "vLLM vs vLLM + speculative decoding",
}
DEFAULT_SCENARIO = "sixteen"


UPLOAD = "upload a file…"


class Runs(Mapping[str, TraceView]):
    """Every run the page can compare, by name ("scenario / policy", "playground live run / label"), in the pickers'
    order; a recorded trace is read when its run is first asked for (``recorded_view``, once per server), not when the
    page lists it: reading all 27 shipped traces to list them was about 0.9 s of a new server's first Compare page."""

    def __init__(self, loaders: dict[str, Callable[[], TraceView]]) -> None:
        self._loaders = loaders

    def __getitem__(self, name: str) -> TraceView:
        return self._loaders[name]()

    def __iter__(self) -> Iterator[str]:
        return iter(self._loaders)

    def __len__(self) -> int:
        return len(self._loaders)


def _runs() -> Runs:
    """Every run the page can compare: the recorded traces (scenario / policy) and this session's live runs."""
    loaders: dict[str, Callable[[], TraceView]] = {
        f"{s} / {p}": partial(recorded_view, s, p) for s in list_scenarios() for p in recorded_policies(s)
    }
    for label, records in live_runs().items():
        loaders[f"playground live run / {label}"] = partial(TraceView, records, source="live")
    return Runs(loaders)


def _pick(label: str, options: list[str], default: str, key: str, pair: str) -> str:
    wanted = st.query_params.get(key, default)
    index = options.index(wanted) if wanted in options else 0
    return st.selectbox(label, options, index=index, key=f"lock:{key}:{pair}")


def _new_pair() -> None:
    """Another pair or number of runs picked: its own default runs, not the URL's runs of the previous choice."""
    for name in ("a", "b", "c", "d", "step"):
        st.query_params.pop(name, None)


def _new_choice(key: str, param: str) -> None:
    """Another pair picked (the widget ``key``, the URL's ``param``): its own runs and their number. A click on the
    pair already picked keeps it (a segmented control would unselect it)."""
    if st.session_state.get(key) is None:
        st.session_state[key] = st.query_params.get(param)
        return
    _new_pair()
    st.query_params.pop("runs", None)


def _new_scenario() -> None:
    """Another scenario picked: its own default pair, runs and number."""
    if st.session_state.get("lock:scenario") is not None:
        st.query_params.pop("pair", None)
    _new_choice("lock:scenario", "scenario")


def shipped_pairs(scenario: str) -> list[str]:
    """The ``PAIRS`` whose every run ``scenario`` ships a trace of, in ``PAIRS`` order."""
    recorded = set(recorded_policies(scenario))
    return [p for p, runs in PAIRS.items() if set(runs) <= recorded]


def _scenario(runs: Runs) -> str:
    """The scenario the page plays: the Scenario picker's (``_pickers``), else ``?scenario=``, else sixteen."""
    options = [s for s in list_scenarios() if f"{s} / static" in runs]
    wanted = st.session_state.get("lock:scenario") or st.query_params.get("scenario", DEFAULT_SCENARIO)
    scenario = wanted if wanted in options else DEFAULT_SCENARIO
    st.query_params["scenario"] = scenario
    return scenario


def _count(pair: str) -> int:
    """How many runs the page compares, 2 to ``MAX_RUNS`` (``?runs=``; default: the pair's)."""
    own = len(PAIRS[pair])
    wanted = st.query_params.get("runs", str(own))
    options = list(range(2, MAX_RUNS + 1))
    count = st.segmented_control(
        "Runs",
        options,
        default=int(wanted) if wanted in [str(n) for n in options] else own,
        key=f"lock:runs:{pair}",
        on_change=_new_pair,
        help="how many runs of one workload play side by side on one step clock (sides A, B, C, D)",
    )
    count = count or own
    if count == own:
        st.query_params.pop("runs", None)
    else:
        st.query_params["runs"] = str(count)
    return count


def _defaults(scenario: str, pair: str, count: int) -> list[str]:
    """The runs the pickers start from: the pair's two, then the scenario's other recorded runs, then the pair's
    again (``batchscope.explain.stories.default_runs``)."""
    return [f"{scenario} / {p}" for p in default_runs(PAIRS[pair], recorded_policies(scenario), count)]


def _pair(scenario: str) -> str:
    """The runs the page plays: the Pair picker's (``_pickers``), else ``?pair=``, else the scenario's own
    (``batchscope.explain.stories.default_pair``), among those ``scenario`` ships (``shipped_pairs``). A ``?runs=``
    without ``?pair=`` names the shipped set of that many runs that starts with the scenario's own pair where there is
    one (four-engines' ``?runs=4``: the four engines, so the Pair picker shows what plays)."""
    options = shipped_pairs(scenario)
    own = next((p for p in options if PAIRS[p] == default_pair(scenario)), options[0])
    count = st.query_params.get("runs")
    if count and count != str(len(PAIRS[own])):  # ?runs=4 alone: the shipped set of 4 that starts with its own pair
        own = next((p for p in options if str(len(PAIRS[p])) == count and PAIRS[p][:2] == PAIRS[own]), own)
    wanted = st.session_state.get(f"lock:pair:{scenario}") or st.query_params.get("pair", own)
    pair = wanted if wanted in options else own
    st.query_params["pair"] = pair
    return pair


def _pickers(scenario: str, pair: str, runs: Runs) -> None:
    """The Scenario and Pair pickers: two clicks reach every shipped pair (every shipped scenario is one button, then
    each set of runs it ships). Drawn last, into their place above the player: drawn before it, they held its frame
    back on every visit (as the run pickers did, ``_choose``)."""
    st.segmented_control(
        "Scenario",
        [s for s in list_scenarios() if f"{s} / static" in runs],
        default=scenario,
        key="lock:scenario",
        on_change=_new_scenario,
        help="the workload: each scenario is one set of requests, recorded under the runs the Pair picker offers",
    )
    st.segmented_control(
        "Pair",
        shipped_pairs(scenario),
        default=pair,
        format_func=lambda p: PAIR_NAMES[p],
        key=f"lock:pair:{scenario}",
        on_change=_new_choice,
        args=(f"lock:pair:{scenario}", "pair"),
        help="which runs of this scenario play side by side; any other run can be picked under Choose other runs",
    )


def _choose(scenario: str, pair: str, runs: Runs) -> tuple[list[str], list[TraceView | None]]:
    """The run pickers (in a popover): how many runs, and each side's run (a recorded one, a live one or an upload);
    returns each side's name and view (``None``: an upload not yet given)."""
    names = [*runs, UPLOAD]
    # the pickers in a popover: closed, Streamlit's frontend does not draw them, and drawn they held the player's
    # frame back by about 0.12 s on every visit (scripts/measure_page_load.py, A/B on 2026-12-04)
    with st.popover(
        "Choose other runs",
        icon=":material/compare_arrows:",
        help="any 2 to 4 runs of one workload: another recorded run, a Playground run, an upload",
    ):
        count = _count(pair)
        columns = st.columns(count)
    picked: list[str] = []
    chosen: list[TraceView | None] = []
    for col, side, default in zip(columns, SIDES.lower(), _defaults(scenario, pair, count)):
        with col:
            name = _pick(f"Run {side.upper()}", names, default, side, pair)
            view = runs.get(name)
            if name == UPLOAD and (uploaded := upload_trace(f"lock:{side}")) is not None:
                view = TraceView(uploaded[0], source="imported", filename=uploaded[1])
        picked.append(name)
        chosen.append(view)
    st.query_params.update(dict(zip(SIDES.lower(), picked)))
    for side in SIDES.lower()[count:]:
        st.query_params.pop(side, None)
    return picked, chosen


def page() -> None:
    st.title("Compare runs: static vs continuous batching, vLLM vs SGLang, and any 2 to 4 runs of one workload")
    runs = _runs()
    scenario = _scenario(runs)
    pair = _pair(scenario)
    top = st.container()  # the Scenario and Pair pickers, drawn after the player
    try:
        _play(scenario, pair, runs)
    finally:
        with top:
            _pickers(scenario, pair, runs)


def _play(scenario: str, pair: str, runs: Runs) -> None:
    """The run pickers, then the player of the runs they pick (or why they cannot play together)."""
    picked, chosen = _choose(scenario, pair, runs)
    with st.expander("What this page compares", icon=":material/info:"):
        st.markdown(INTRO)
    if any(v is None for v in chosen):
        st.info("Upload the trace to compare (a Batchscope trace or one from the vLLM tracer).")
        return
    views = [v for v in chosen if v is not None]
    key = "lock:" + ":".join(picked)
    initial = query_int("step", 0, 0, max(v.num_steps for v in views) - 1)
    if len(views) > 2:
        ok, why = same_workloads(views)
        if not ok:
            st.error(f"These runs are not of one workload, so a step-by-step comparison would mislead: {md(why)}")
            return
        compare_runs(views, key=key, initial=initial)
        return
    va, vb = views
    ok, why = same_workload(va, vb)
    if not ok:
        st.error(f"These two runs are not of one workload, so a step-by-step comparison would mislead: {md(why)}")
        return
    if {va.policy, vb.policy} == {"static", "continuous"} and va.policy != vb.policy and not config_diff(va, vb)[1:]:
        compare({va.policy: va, vb.policy: vb}, key=key, initial=initial)
    elif family_pair(va, vb):
        compare_families(va, vb, key=key, initial=initial)
    else:
        compare_pair(va, vb, key=key, initial=initial)
