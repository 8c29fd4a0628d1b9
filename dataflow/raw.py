"""tensorpack's module path ``tensorpack.dataflow.raw``, kept so imports written against it work:
the same names, re-exported from where they live now. New code imports from :mod:`dataflow`."""

from .sources import DataFromGenerator, DataFromIterable, DataFromList, DataFromQueue, FakeData

__all__ = [
    "DataFromGenerator",
    "DataFromIterable",
    "DataFromList",
    "DataFromQueue",
    "FakeData",
]
