"""dataflow: composable, parallel data loading for ML training (successor of tensorpack's DataFlow)."""

from . import checkpoint, dataset, imgaug
from ._errors import (
    CodecError,
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
from ._rng import CompatGenerator
from ._seeding import set_seed
from ._version import __version__
from .base import DataFlow, Datapoint, ProxyDataFlow, ReentrancyGuard, RNGDataFlow
from .formats._arrow import to_arrow
from .formats._caffe_lmdb import CaffeLMDB
from .formats._common import FormatError
from .formats._hdf5_format import HDF5Data, HDF5Serializer
from .formats._lmdb_data import LMDBData
from .formats._lmdb_decoder import LMDBDataDecoder
from .formats._lmdb_format import LMDBSerializer
from .formats._numpy_format import NumpySerializer
from .formats._parquet import ParquetData
from .formats._parquet_save import ParquetSerializer
from .formats._svmlight import SVMLightData
from .formats._tf_example import encode_example, parse_example
from .formats._tfrecord import TFRecordData, TFRecordSerializer
from .formats._to_hf import to_hf
from .formats._webdataset import WebDatasetData, WebDatasetSerializer
from .image._augment import AugmentImageComponent, AugmentImageComponents, AugmentImageCoordinates
from .image._from_file import ImageFromFile
from .ops._batch import BatchData, BatchDataByShape
from .ops._bucket import BucketByLengthData
from .ops._cache import CacheData
from .ops._combine import ConcatData, JoinData, RandomChooseData, RandomMixData
from .ops._interleave import InterleaveData
from .ops._map import FilterData, MapData, MapDataComponent, SelectComponent
from .ops._mix import WeightedMixData, mix
from .ops._pack import PackData
from .ops._padded_batch import PaddedBatchData
from .ops._repeat import FixedSizeData, RepeatedData, RepeatedDataPoint, TakeData
from .ops._shard import ShardData
from .ops._shuffle import LocallyShuffleData
from .parallel import (
    MultiProcessMapAndBatchData,
    MultiProcessPrefetchData,
    MultiThreadPrefetchData,
    PrefetchData,
    PrefetchDataZMQ,
)
from .parallel._map_and_batch import MultiProcessMapAndBatchDataZMQ
from .parallel._maps import MultiProcessMapData, MultiProcessMapDataZMQ
from .parallel._remote import RemoteDataZMQ, generate_curve_keypair, send_dataflow_zmq
from .parallel._runners import MultiProcessRunner, MultiProcessRunnerZMQ
from .parallel._threads import MultiThreadMapData, MultiThreadRunner, ThreadPrefetchData
from .sources._fake import FakeData
from .sources._hf import DataFromHF, from_hf
from .sources._hf_stream import DataFromHFIterable
from .sources._iterables import DataFromGenerator, DataFromIterable, DataFromQueue
from .sources._memory import DataFromArrays, DataFromList
from .sources._text import TextLineData
from .tools._printing import PrintData
from .tools._speed import TestDataSpeed

__all__ = [
    "AugmentImageComponent",
    "AugmentImageComponents",
    "AugmentImageCoordinates",
    "BatchData",
    "BatchDataByShape",
    "BucketByLengthData",
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
    "DataFromHF",
    "DataFromHFIterable",
    "DataFromIterable",
    "DataFromList",
    "DataFromQueue",
    "Datapoint",
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
    "PackData",
    "PaddedBatchData",
    "ParquetData",
    "ParquetSerializer",
    "PrefetchData",
    "PrefetchDataZMQ",
    "PrintData",
    "ProxyDataFlow",
    "RNGDataFlow",
    "RandomChooseData",
    "RandomMixData",
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
    "WebDatasetData",
    "WebDatasetSerializer",
    "WeightedMixData",
    "WorkerDied",
    "WorkerError",
    "__version__",
    "checkpoint",
    "dataset",
    "encode_example",
    "from_hf",
    "generate_curve_keypair",
    "imgaug",
    "mix",
    "parse_example",
    "send_dataflow_zmq",
    "set_seed",
    "to_arrow",
    "to_hf",
]
