"""tensorpack's module path ``tensorpack.dataflow.raw``, kept so imports written against it work:
the same names, re-exported from where they live now. New code imports from :mod:`dataflow`."""

from .sources._fake import FakeData
from .sources._iterables import DataFromGenerator, DataFromIterable, DataFromQueue
from .sources._memory import DataFromList

__all__ = [
    "DataFromGenerator",
    "DataFromIterable",
    "DataFromList",
    "DataFromQueue",
    "FakeData",
]
