"""tensorpack's module path ``tensorpack.dataflow.format``, kept so imports written against it work:
the same names, re-exported from where they live now. New code imports from :mod:`dataflow`."""

from .formats._caffe_lmdb import CaffeLMDB
from .formats._hdf5_format import HDF5Data
from .formats._lmdb_data import LMDBData
from .formats._lmdb_decoder import LMDBDataDecoder
from .formats._svmlight import SVMLightData

__all__ = [
    "CaffeLMDB",
    "HDF5Data",
    "LMDBData",
    "LMDBDataDecoder",
    "SVMLightData",
]
