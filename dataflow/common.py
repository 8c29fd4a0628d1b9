"""tensorpack's module path ``tensorpack.dataflow.common``, kept so imports written against it work:
the same names, re-exported from where they live now. New code imports from :mod:`dataflow`."""

from .ops.batch import BatchData, BatchDataByShape
from .ops.cache import CacheData
from .ops.combine import ConcatData, JoinData, RandomChooseData, RandomMixData
from .ops.map import MapData, MapDataComponent, SelectComponent
from .ops.repeat import FixedSizeData, RepeatedData, RepeatedDataPoint
from .ops.shuffle import LocallyShuffleData
from .tools.printing import PrintData
from .tools.speed import TestDataSpeed

__all__ = [
    "BatchData",
    "BatchDataByShape",
    "CacheData",
    "ConcatData",
    "FixedSizeData",
    "JoinData",
    "LocallyShuffleData",
    "MapData",
    "MapDataComponent",
    "PrintData",
    "RandomChooseData",
    "RandomMixData",
    "RepeatedData",
    "RepeatedDataPoint",
    "SelectComponent",
    "TestDataSpeed",
]
