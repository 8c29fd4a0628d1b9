"""Parallel execution: the only package that starts processes or threads or opens sockets.

The public flows live in :mod:`.runners`, :mod:`.threads`, :mod:`.maps`, :mod:`.prefetch` and
:mod:`.remote`; the names below are also importable from here, the module path tensorpack
users wrote (``tensorpack.dataflow.parallel``), old aliases included.
"""

from ._deprecated import (
    MultiProcessMapAndBatchData,
    MultiProcessPrefetchData,
    MultiThreadPrefetchData,
    PrefetchData,
    PrefetchDataZMQ,
)
from ._runners import MultiProcessRunner, MultiProcessRunnerZMQ
from ._threads import MultiThreadRunner

__all__ = [
    "MultiProcessMapAndBatchData",
    "MultiProcessPrefetchData",
    "MultiProcessRunner",
    "MultiProcessRunnerZMQ",
    "MultiThreadPrefetchData",
    "MultiThreadRunner",
    "PrefetchData",
    "PrefetchDataZMQ",
]
