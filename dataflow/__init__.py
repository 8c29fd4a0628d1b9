"""dataflow: composable, parallel data loading for ML training (successor of tensorpack's DataFlow)."""

from . import checkpoint, dataset, imgaug, seeding
from ._rng import CompatGenerator
from ._version import __version__
from .base import DataFlow, ProxyDataFlow, ReentrancyGuard, RNGDataFlow
from .codec import CodecError
from .errors import (
    ComponentError,
    DataFlowError,
    DataFlowNotReset,
    DataFlowReentrantError,
    DataFlowTerminated,
    LengthUnknownError,
    StateError,
    StateUnsupportedError,
    WorkerDied,
    WorkerError,
)
from .formats import (
    CaffeLMDB,
    FormatError,
    HDF5Data,
    HDF5Serializer,
    LMDBData,
    LMDBDataDecoder,
    LMDBSerializer,
    NumpySerializer,
    SVMLightData,
    TFRecordData,
    TFRecordSerializer,
)
from .image import AugmentImageComponent, AugmentImageComponents, AugmentImageCoordinates, ImageFromFile
from .on_ray import DataFromRay, RayMapData, RayRunner, from_ray, to_ray
from .ops.batch import BatchData, BatchDataByShape
from .ops.cache import CacheData
from .ops.combine import ConcatData, JoinData, RandomChooseData, RandomMixData
from .ops.interleave import InterleaveData
from .ops.map import FilterData, MapData, MapDataComponent, SelectComponent
from .ops.padded_batch import PaddedBatchData
from .ops.repeat import FixedSizeData, RepeatedData, RepeatedDataPoint, TakeData
from .ops.shard import ShardData
from .ops.shuffle import LocallyShuffleData
from .parallel import (
    MultiProcessMapAndBatchData,
    MultiProcessPrefetchData,
    MultiThreadPrefetchData,
    PrefetchData,
    PrefetchDataZMQ,
)
from .parallel.map_and_batch import MultiProcessMapAndBatchDataZMQ
from .parallel.maps import MultiProcessMapData, MultiProcessMapDataZMQ
from .parallel.remote import RemoteDataZMQ, generate_curve_keypair, send_dataflow_zmq
from .parallel.runners import MultiProcessRunner, MultiProcessRunnerZMQ
from .parallel.threads import MultiThreadMapData, MultiThreadRunner, ThreadPrefetchData
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
from .tools.printing import PrintData
from .tools.speed import TestDataSpeed

__all__ = [
    "AugmentImageComponent",
    "AugmentImageComponents",
    "AugmentImageCoordinates",
    "BatchData",
    "BatchDataByShape",
    "CacheData",
    "CaffeLMDB",
    "CodecError",
    "CompatGenerator",
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
    "DataFromRay",
    "FakeData",
    "FilterData",
    "FixedSizeData",
    "FormatError",
    "HDF5Data",
    "HDF5Serializer",
    "ImageFromFile",
    "InterleaveData",
    "JoinData",
    "LMDBData",
    "LMDBDataDecoder",
    "LMDBSerializer",
    "LengthUnknownError",
    "LocallyShuffleData",
    "MapData",
    "MapDataComponent",
    "MultiProcessMapAndBatchData",
    "MultiProcessMapAndBatchDataZMQ",
    "MultiProcessMapData",
    "MultiProcessMapDataZMQ",
    "MultiProcessPrefetchData",
    "MultiProcessRunner",
    "MultiProcessRunnerZMQ",
    "MultiThreadMapData",
    "MultiThreadPrefetchData",
    "MultiThreadRunner",
    "NumpySerializer",
    "PaddedBatchData",
    "PrefetchData",
    "PrefetchDataZMQ",
    "PrintData",
    "ProxyDataFlow",
    "RNGDataFlow",
    "RandomChooseData",
    "RandomMixData",
    "RayMapData",
    "RayRunner",
    "ReentrancyGuard",
    "RemoteDataZMQ",
    "RepeatedData",
    "RepeatedDataPoint",
    "SVMLightData",
    "SelectComponent",
    "ShardData",
    "StateError",
    "StateUnsupportedError",
    "TFRecordData",
    "TFRecordSerializer",
    "TakeData",
    "TestDataSpeed",
    "TextLineData",
    "ThreadPrefetchData",
    "WorkerDied",
    "WorkerError",
    "__version__",
    "checkpoint",
    "dataset",
    "from_ray",
    "generate_curve_keypair",
    "imgaug",
    "seeding",
    "send_dataflow_zmq",
    "set_seed",
    "to_ray",
]
