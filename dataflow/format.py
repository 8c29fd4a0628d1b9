"""tensorpack's module path ``tensorpack.dataflow.format``, kept so imports written against it work:
the same names, re-exported from where they live now. New code imports from :mod:`dataflow`."""

from .formats import CaffeLMDB, HDF5Data, LMDBData, LMDBDataDecoder, SVMLightData

__all__ = [
    "CaffeLMDB",
    "HDF5Data",
    "LMDBData",
    "LMDBDataDecoder",
    "SVMLightData",
]
