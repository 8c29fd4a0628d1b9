"""dataflow: composable, parallel data loading for ML training (successor of tensorpack's DataFlow)."""

from . import seeding
from .base import DataFlow, ProxyDataFlow, ReentrancyGuard, RNGDataFlow
from .errors import (
    ComponentError,
    DataFlowError,
    DataFlowNotReset,
    DataFlowReentrantError,
    DataFlowTerminated,
    LengthUnknownError,
    WorkerDied,
    WorkerError,
)
from .ops.batch import BatchData, BatchDataByShape
from .ops.cache import CacheData
from .ops.combine import ConcatData, JoinData, RandomChooseData, RandomMixData
from .ops.interleave import InterleaveData
from .ops.map import FilterData, MapData, MapDataComponent, SelectComponent
from .ops.padded_batch import PaddedBatchData
from .ops.repeat import FixedSizeData, RepeatedData, RepeatedDataPoint, TakeData
from .ops.shuffle import LocallyShuffleData
from .seeding import set_seed
from .sources import (
    DataFromArrays,
    DataFromGenerator,
    DataFromIterable,
    DataFromList,
    DataFromQueue,
    FakeData,
    TextLineData,
)

__version__ = "0.1.0"

__all__ = [
    "BatchData",
    "BatchDataByShape",
    "CacheData",
    "ComponentError",
    "ConcatData",
    "DataFlow",
    "DataFlowError",
    "DataFlowNotReset",
    "DataFlowReentrantError",
    "DataFlowTerminated",
    "DataFromArrays",
    "DataFromGenerator",
    "DataFromIterable",
    "DataFromList",
    "DataFromQueue",
    "FakeData",
    "FilterData",
    "FixedSizeData",
    "InterleaveData",
    "JoinData",
    "LengthUnknownError",
    "LocallyShuffleData",
    "MapData",
    "MapDataComponent",
    "PaddedBatchData",
    "ProxyDataFlow",
    "RNGDataFlow",
    "RandomChooseData",
    "RandomMixData",
    "ReentrancyGuard",
    "RepeatedData",
    "RepeatedDataPoint",
    "SelectComponent",
    "TakeData",
    "TextLineData",
    "WorkerDied",
    "WorkerError",
    "__version__",
    "seeding",
    "set_seed",
]
