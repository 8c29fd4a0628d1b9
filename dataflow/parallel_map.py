"""tensorpack's module path ``tensorpack.dataflow.parallel_map``, kept so imports written against it work:
the same names, re-exported from where they live now. New code imports from :mod:`dataflow`."""

from .parallel import MultiProcessMapAndBatchData
from .parallel._map_and_batch import MultiProcessMapAndBatchDataZMQ
from .parallel._maps import MultiProcessMapData, MultiProcessMapDataZMQ
from .parallel._threads import MultiThreadMapData

__all__ = [
    "MultiProcessMapAndBatchData",
    "MultiProcessMapAndBatchDataZMQ",
    "MultiProcessMapData",
    "MultiProcessMapDataZMQ",
    "MultiThreadMapData",
]
