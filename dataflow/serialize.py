"""tensorpack's module path ``tensorpack.dataflow.serialize``, kept so imports written against it work:
the same names, re-exported from where they live now. New code imports from :mod:`dataflow`."""

from .formats._hdf5_format import HDF5Serializer
from .formats._lmdb_format import LMDBSerializer
from .formats._numpy_format import NumpySerializer
from .formats._tfrecord import TFRecordSerializer

__all__ = [
    "HDF5Serializer",
    "LMDBSerializer",
    "NumpySerializer",
    "TFRecordSerializer",
]
