"""Tools to measure and inspect flows: the speed test's result, the per-stage profiler, the
timeline tracer, the tuner and a datapoint's description. (``TestDataSpeed`` and ``PrintData``,
tensorpack's names, are imported from :mod:`dataflow`; ``df.speed_test()`` and
``python -m dataflow bench`` are the usual ways in.)
"""

from .printing import describe_datapoint
from .profiling import ProfileResult, StageTiming, profile
from .speed import SpeedResult
from .tracing import TraceSession, trace
from .tuning import TuneResult, tune

__all__ = [
    "ProfileResult",
    "SpeedResult",
    "StageTiming",
    "TraceSession",
    "TuneResult",
    "describe_datapoint",
    "profile",
    "trace",
    "tune",
]
