"""Was the machine busy while a trace was recorded? Contention findings from the step times alone.

A trace's wall-clock metrics are only worth shipping if the run had the CPU to itself. Contention shows in three
ways, each checked here on the records ``[header, step..., summary]`` (``batchscope.steplog.trace.read``), standard
library only:

- **spikes**: a step far longer than the steps like it around it: over ``SPIKE_RATIO`` times the median of the
  comparable steps within ``WINDOW`` steps either side and over ``SPIKE_MIN_S`` longer than that median;
- **erratic**: steps that do the same work take very different times: of the pairs of consecutive comparable steps,
  over ``ERRATIC_SHARE`` (and at least ``ERRATIC_MIN``) differ by over ``JUMP_RATIO`` (and ``JUMP_MIN_S``);
- **low CPU share**: the header's ``cpu_share`` (process CPU time during the steps over their wall time times
  PyTorch's thread count, recorded by the engine on CPU runs) is under ``MIN_CPU_SHARE``: the run waited for the
  CPU throughout, however evenly.

Two steps are comparable when they have the same shape: the same ``num_batched_tokens`` and the same rows in the
forward pass (scheduled requests plus padding rows). So a prefill chunk is compared with prefills of its size, never
with a decode step (it legitimately takes several times as long); a step whose shape is not repeated nearby is not
judged. The first ``WARMUP_STEPS`` steps and the first step of each shape are warm-up (new shapes cost extra once,
in a quiet run too) and are never judged or used as the reference.

Calibrated on the shipped traces (``python -m batchscope metrics`` prints the finding): quiet runs have at most 2% of
jumps and no step over 6x its comparable neighbours; the two recorded on a busy machine (median step 0.55 s and
1.53 s against about 0.06 s) have 39% and 49% of jumps. CPU share on a 2-core machine: 1.00 (1 thread) and 0.97 (2
threads) quiet; 0.66 with two busy processes beside a 1-thread run; 0.18 with one beside a 2-thread run.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

WARMUP_STEPS = 2
WINDOW = 8
MIN_COMPARABLE = 3  # comparable neighbours needed to judge a step
SPIKE_RATIO = 10.0
SPIKE_MIN_S = 0.1
JUMP_RATIO = 1.5
JUMP_MIN_S = 0.01
ERRATIC_SHARE = 0.10
ERRATIC_MIN = 3
MIN_CPU_SHARE = 0.75


@dataclass(frozen=True)
class Spike:
    """Step ``step`` took ``seconds`` where comparable steps around it took ``reference_s`` (their median)."""

    step: int
    seconds: float
    reference_s: float


@dataclass(frozen=True)
class TimingReport:
    """The timing of one trace and what in it shows contention (``findings``: empty for a quiet run)."""

    num_steps: int
    median_step_s: float
    spikes: tuple[Spike, ...]
    worst_ratio: float  # the longest judged step over its comparable neighbours' median (0: none judged)
    jumps: int  # consecutive comparable steps that differ by over JUMP_RATIO
    pairs: int  # consecutive comparable steps
    cpu_share: float | None  # the header's, where recorded
    findings: tuple[str, ...]

    @property
    def contended(self) -> bool:
        return bool(self.findings)

    @property
    def message(self) -> str:
        """One line for a person: what was found, or that the timing looks quiet."""
        base = f"median step {self.median_step_s:.3f} s over {self.num_steps} steps"
        if not self.findings:
            return f"step times look quiet ({base})"
        return f"step times show CPU contention ({base}): " + "; ".join(self.findings)


def _shape(step: dict) -> tuple[int, int]:
    return step["num_batched_tokens"], len(step["scheduled"]) + len(step.get("padding_slots", []))


def _judged(steps: list[dict]) -> list[bool]:
    """Per step: may it be judged or serve as a reference (not warm-up, not the first of its shape)?"""
    seen: set[tuple[int, int]] = set()
    out = []
    for i, s in enumerate(steps):
        out.append(i >= WARMUP_STEPS and _shape(s) in seen)
        seen.add(_shape(s))
    return out


def _spikes(steps: list[dict], durations: list[float], judged: list[bool]) -> tuple[list[Spike], float]:
    """Steps over SPIKE_RATIO x (and SPIKE_MIN_S over) their comparable neighbours' median; the worst ratio."""
    spikes, worst = [], 0.0
    for i, s in enumerate(steps):
        if not judged[i]:
            continue
        lo, hi = max(0, i - WINDOW), min(len(steps), i + WINDOW + 1)
        near = [durations[j] for j in range(lo, hi) if j != i and judged[j] and _shape(steps[j]) == _shape(s)]
        if len(near) < MIN_COMPARABLE:
            continue
        ref = statistics.median(near)
        ratio = durations[i] / ref if ref > 0 else 0.0
        worst = max(worst, ratio)
        if ratio > SPIKE_RATIO and durations[i] - ref > SPIKE_MIN_S:
            spikes.append(Spike(s["step"], durations[i], ref))
    return spikes, worst


def _jumps(steps: list[dict], durations: list[float], judged: list[bool]) -> tuple[int, int]:
    """(jumps, pairs): consecutive comparable steps, and those that differ by over JUMP_RATIO and JUMP_MIN_S."""
    jumps = pairs = 0
    for i in range(1, len(steps)):
        if not (judged[i - 1] and judged[i] and _shape(steps[i - 1]) == _shape(steps[i])):
            continue
        pairs += 1
        lo, hi = sorted((durations[i - 1], durations[i]))
        if hi - lo > JUMP_MIN_S and hi > JUMP_RATIO * lo:
            jumps += 1
    return jumps, pairs


def _findings(spikes: list[Spike], jumps: int, pairs: int, cpu_share: float | None) -> list[str]:
    found = []
    if spikes:
        w = max(spikes, key=lambda sp: sp.seconds - sp.reference_s)
        found.append(
            f"{len(spikes)} step(s) over {SPIKE_RATIO:g}x the steps like them around them (worst: step {w.step}, "
            f"{w.seconds:.3f} s against {w.reference_s:.3f} s)"
        )
    if jumps >= ERRATIC_MIN and jumps > ERRATIC_SHARE * pairs:
        found.append(
            f"{jumps} of {pairs} consecutive steps doing the same work differ by over {JUMP_RATIO:g}x "
            f"({jumps / pairs:.0%}; a quiet run: under {ERRATIC_SHARE:.0%})"
        )
    if cpu_share is not None and cpu_share < MIN_CPU_SHARE:
        found.append(f"the run had {cpu_share:.0%} of its threads' CPU time (a quiet run: about 100%)")
    return found


def check_timing(records: list[dict]) -> TimingReport:
    """The contention findings of a trace (``[header, step..., summary]``, as ``batchscope.steplog.trace.read`` returns
    it).

    Step times are ``t_end - t_start`` of each step record; the header's ``cpu_share`` is judged on CPU runs only
    (on a GPU the CPU mostly waits for the device).
    """
    header = records[0] if records and records[0].get("type") == "header" else {}
    steps = [r for r in records if r.get("type") == "step"]
    durations = [max(0.0, s["t_end"] - s["t_start"]) for s in steps]
    judged = _judged(steps)
    spikes, worst = _spikes(steps, durations, judged)
    jumps, pairs = _jumps(steps, durations, judged)
    share = header.get("cpu_share") if str(header.get("device", "cpu")).startswith("cpu") else None
    return TimingReport(
        num_steps=len(steps),
        median_step_s=statistics.median(durations) if durations else 0.0,
        spikes=tuple(spikes),
        worst_ratio=worst,
        jumps=jumps,
        pairs=pairs,
        cpu_share=share,
        findings=tuple(_findings(spikes, jumps, pairs, share)),
    )
