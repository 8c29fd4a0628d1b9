"""Decoding what tensorpack wrote: its serializer's records in LMDB files and ZMQ messages.

tensorpack encoded every datapoint with ``tensorpack.utils.serialize.dumps``: a pickle by
default (``TENSORPACK_SERIALIZE=pickle``, the default of 0.11), or msgpack with
``msgpack-numpy``'s array extension (``TENSORPACK_SERIALIZE=msgpack``). :func:`loads_tensorpack`
reads both:

- **msgpack** is decoded by ``msgpack`` with ``msgpack-numpy``'s decoder (the package that
  wrote it, so every array layout it produced reads back), except arrays of Python objects,
  which msgpack-numpy stores as pickles: those are unpickled only with ``allow_pickle=True``.
  The decoder is msgpack's implementation, not the ``msgpack.unpackb`` attribute, so it stays
  safe after ``import tensorpack`` (whose ``msgpack_numpy.patch()`` would unpickle first).
- **pickle** (recognised by its protocol header) is unpickled only with ``allow_pickle=True``,
  like :func:`numpy.load`: unpickling runs whatever code the bytes name, so only do it for
  files and senders you trust.

Anything else raises :class:`~dataflow.FormatError` naming where it came from.
"""

from __future__ import annotations

import pickle
from typing import Any

from .._errors import FormatError
from .._msgpack import unpackb as _unpackb

__all__ = ["is_pickle", "loads_tensorpack"]

#: msgpack's limits, as tensorpack's loads set them: a record is at most 2 GiB
_MAX = 2**31 - 1


def is_pickle(buf: bytes) -> bool:
    """Whether ``buf`` starts like a pickle of protocol 2 or later (what tensorpack wrote)."""
    return len(buf) > 2 and buf[0] == 0x80 and 2 <= buf[1] <= 5


def _refuse_pickle(where: str, what: str) -> FormatError:
    return FormatError(
        f"{where}: {what} is a pickle written by tensorpack; dataflow unpickles only with "
        f"allow_pickle=True (unpickling runs code named by the data: pass it only for files and "
        f"senders you trust), or re-save the data with tensorpack's msgpack serializer "
        f"(TENSORPACK_SERIALIZE=msgpack) or with dataflow"
    )


def loads_tensorpack(buf: Any, *, allow_pickle: bool, where: str) -> Any:
    """Decode one datapoint written by tensorpack's ``dumps`` (``where`` names the file and
    record, or the sender, in errors). Arrays come back read-only views of ``buf``'s copy."""
    data = bytes(buf)
    if is_pickle(data):
        if not allow_pickle:
            raise _refuse_pickle(where, "the value")
        try:
            return pickle.loads(data)
        except Exception as e:
            raise FormatError(f"{where}: the pickle cannot be loaded ({type(e).__name__}: {e})") from e
    import msgpack_numpy

    def hook(obj: dict[Any, Any]) -> Any:
        if obj.get(b"nd") is True and obj.get(b"kind") == b"O" and not allow_pickle:
            raise _refuse_pickle(where, "an array of Python objects in the value")
        return msgpack_numpy.decode(obj)

    try:
        return _unpackb(
            data,
            raw=False,
            object_hook=hook,
            strict_map_key=False,
            max_bin_len=_MAX,
            max_array_len=_MAX,
            max_map_len=_MAX,
            max_str_len=_MAX,
            max_ext_len=_MAX,
        )
    except FormatError:
        raise
    except Exception as e:  # msgpack's errors: ExtraData, FormatError, ValueError, TypeError...
        raise FormatError(
            f"{where}: the value is neither tensorpack's msgpack nor a pickle ({type(e).__name__}: {e})"
        ) from e
