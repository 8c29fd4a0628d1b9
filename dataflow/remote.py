"""tensorpack's module path ``tensorpack.dataflow.remote``, kept so imports written against it work:
the same names, re-exported from where they live now. New code imports from :mod:`dataflow`."""

from .parallel._remote import RemoteDataZMQ, send_dataflow_zmq

__all__ = [
    "RemoteDataZMQ",
    "send_dataflow_zmq",
]
