"""tensorpack's module path ``tensorpack.dataflow.common``, kept so imports written against it work:
the same names, re-exported from where they live now. New code imports from :mod:`dataflow`."""

from .ops._batch import BatchData, BatchDataByShape
from .ops._cache import CacheData
from .ops._combine import ConcatData, JoinData, RandomChooseData, RandomMixData
from .ops._map import MapData, MapDataComponent, SelectComponent
from .ops._repeat import FixedSizeData, RepeatedData, RepeatedDataPoint
from .ops._shuffle import LocallyShuffleData
from .tools._printing import PrintData
from .tools._speed import TestDataSpeed

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
