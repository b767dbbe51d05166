"""The facts of each step of a trace, computed once and read by every view: states, work, events in each engine's
own words, blocks given back and handed on, and the run's counters (``batchscope.facts.model``)."""

from batchscope.facts.model import Counters, Event, Facts, PoolFacts, RequestFacts, StepFacts, facts
from batchscope.facts.vocabulary import EVICTION, Eviction, eviction, family

__all__ = [
    "EVICTION",
    "Counters",
    "Event",
    "Eviction",
    "Facts",
    "PoolFacts",
    "RequestFacts",
    "StepFacts",
    "eviction",
    "facts",
    "family",
]
