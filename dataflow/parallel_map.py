"""tensorpack's module path ``tensorpack.dataflow.parallel_map``, kept so imports written against it work:
the same names, re-exported from where they live now. New code imports from :mod:`dataflow`."""

from .parallel import MultiProcessMapAndBatchData
from .parallel.map_and_batch import MultiProcessMapAndBatchDataZMQ
from .parallel.maps import MultiProcessMapData, MultiProcessMapDataZMQ
from .parallel.threads import MultiThreadMapData

__all__ = [
    "MultiProcessMapAndBatchData",
    "MultiProcessMapAndBatchDataZMQ",
    "MultiProcessMapData",
    "MultiProcessMapDataZMQ",
    "MultiThreadMapData",
]
