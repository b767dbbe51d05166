"""The Playground's live runs: start one in the background, show its progress with a Cancel button, collect it.

    Run live ──► cached?  yes: the result at once
                          no:  LiveRun (batchscope/app/live.py) queued behind the machine's lock ──► running ──► done
                                                                          Cancel ──► cancelled (partial trace kept)
                                                      Cancel this request ──► that request aborted, the run goes on

The page polls the run from a fragment that reruns every ``POLL_S`` seconds, each poll waiting up to ``END_WAIT_S``
for the run's end; when the run ends, a full rerun draws the result. Finished complete runs are cached by their
settings (shared by sessions: same settings, same trace); a cancelled run is kept for this session only, and its
traces say ``partial``.
"""

from __future__ import annotations

import streamlit as st

from batchscope.app import state
from batchscope.app.common import model_and_lock
from batchscope.app.live import LiveRun
from batchscope.cli.progress import Ends
from batchscope.engine.config import EngineConfig

POLL_S = 0.5
END_WAIT_S = 0.4  # each poll then waits this long for the run's end before it returns (see ``watch``)


@st.cache_resource
def run_cache() -> dict:
    """Finished live runs, keyed by their settings (shared by sessions: same settings, same greedy trace)."""
    return {}


def start(settings_key: str, specs: list[dict], configs: dict[str, EngineConfig]) -> None:
    """Show the cached result for these settings, or start a live run of ``specs`` under each config in turn."""
    from batchscope.engine.llm import generate_trace

    if settings_key in run_cache():
        state.set_live_runs(run_cache()[settings_key], settings_key)
        return
    loaded, lock = model_and_lock()

    ids = [str(s.get("request_id", f"r{i}")) for i, s in enumerate(specs)]

    def work(should_stop, report) -> dict[str, list[dict]]:
        out = {}
        for i, (label, config) in enumerate(configs.items(), start=1):
            if should_stop():
                break
            run, ends = f"run {i} of {len(configs)} ({label})", Ends()

            def on_step(rec, run=run, ends=ends):
                ends.add(rec)
                job.mark_finished([f["request_id"] for f in rec["finished"]])
                report(
                    ends.done / len(specs),
                    f"{run}: step {rec['step']}, {rec['num_batched_tokens']} tokens this step, {ends.note(len(specs))}",
                )

            out[label] = generate_trace(
                loaded,
                specs,
                config,
                scenario="playground",
                on_step=on_step,
                should_stop=should_stop,
                on_engine=lambda engine: job.attach(engine, ids),
            )
        return out

    job = LiveRun(work, lock, settings_key)
    state.set_live_job(job.start())


def collect() -> LiveRun | None:
    """Take this session's run if it ended (its result becomes the live result); returns the run still in
    progress, or one that failed (its error is shown until the next run)."""
    job = state.live_job()
    if job is None or not job.finished or job.status == "error":
        return job
    state.set_live_job(None)
    result = {p: records for p, records in job.result.items() if len(records) > 2}  # at least one step
    if job.status == "done" and not job.cancelled_requests:  # a request cancelled by hand: this session's only
        run_cache()[job.settings_key] = result
    if result:
        state.set_live_runs(result, job.settings_key)
    else:
        st.info("The live run was cancelled before its first step: nothing to show.", icon=":material/cancel:")
    return None


def watch() -> None:
    """Progress, queue position and a Cancel button, refreshed every ``POLL_S`` s; a full rerun when it ends."""

    @st.fragment(run_every=POLL_S)
    def panel() -> None:
        job = state.live_job()
        if job is None:
            return
        if job.finished:
            st.rerun()  # the whole page: draw the result
        if job.status == "queued":
            st.info(
                "Queued: another user's live run is in progress on this machine; yours starts as soon as it ends "
                "or is cancelled.",
                icon=":material/hourglass_top:",
            )
        st.progress(job.fraction, text=job.text)
        stopping = job.cancelled.is_set()
        st.button(
            "Cancelling…" if stopping else "Cancel",
            key="live:cancel",
            disabled=stopping,
            icon=":material/stop:",
            on_click=job.cancel,
            help="stop after the current step; the partial trace is kept",
        )
        if job.status == "running" and job.unfinished and not stopping:
            cancel_one(job)
        # With the panel on the page (it is the page's last element), wait a little less than a poll for the run to
        # end: the result then follows the run's last step within a few ms, not up to POLL_S later. A click on
        # Cancel meanwhile takes effect when the wait ends.
        job.join(END_WAIT_S)
        if job.finished:
            st.rerun()

    panel()


def cancel_one(job: LiveRun) -> None:
    """Pick a request still running or waiting and abort it before the next step, as a client that went away."""
    left, right = st.columns([3, 2], vertical_alignment="bottom")
    rid = left.selectbox("Request", job.unfinished, key="live:cancel-one:pick")
    right.button(
        "Cancel this request",
        key="live:cancel-one",
        icon=":material/person_remove:",
        on_click=job.cancel_request,
        args=(rid,),
        help="abort it before the next step, as a server aborts a request whose client went away: its KV blocks are "
        "freed and the others run on (the trace lists the abort)",
    )
