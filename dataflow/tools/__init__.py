"""Tools to measure and inspect flows: the speed test's result, the per-stage profiler, the
timeline tracer, the tuner, the worker processes' memory and CPU, and a datapoint's
description. (``TestDataSpeed`` and ``PrintData``, tensorpack's names, are imported from
:mod:`dataflow`; ``df.speed_test()`` and ``python -m dataflow bench`` are the usual ways in.)
"""

from ._printing import describe_datapoint
from ._profiling import ProfileResult, StageTiming, profile
from ._speed import SpeedResult
from ._tracing import TraceSession, trace
from ._tuning import TuneResult, tune
from ._workers import MemorySampler, WorkerUsage, worker_usage

__all__ = [
    "MemorySampler",
    "ProfileResult",
    "SpeedResult",
    "StageTiming",
    "TraceSession",
    "TuneResult",
    "WorkerUsage",
    "describe_datapoint",
    "profile",
    "trace",
    "tune",
    "worker_usage",
]
