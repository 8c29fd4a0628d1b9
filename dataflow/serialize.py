"""tensorpack's module path ``tensorpack.dataflow.serialize``, kept so imports written against it work:
the same names, re-exported from where they live now. New code imports from :mod:`dataflow`."""

from .formats import HDF5Serializer, LMDBSerializer, NumpySerializer, TFRecordSerializer

__all__ = [
    "HDF5Serializer",
    "LMDBSerializer",
    "NumpySerializer",
    "TFRecordSerializer",
]
