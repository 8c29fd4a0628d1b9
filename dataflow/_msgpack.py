"""msgpack's own implementation, whatever ``msgpack_numpy.patch()`` did to the module.

``import tensorpack`` runs ``msgpack_numpy.patch()``, which replaces ``msgpack.packb``,
``msgpack.unpackb``, ``msgpack.Packer``, ... with wrappers that pickle arrays of Python
objects and unpickle them on decode (running code named by the data). The codec and the
tensorpack decoder take the implementation from here, so they stay safe and unchanged in a
process that also imports tensorpack.
"""

from __future__ import annotations

try:
    from msgpack._cmsgpack import Packer, unpackb
except ImportError:  # pragma: no cover - msgpack built without its C extension
    from msgpack.fallback import Packer, unpackb

__all__ = ["Packer", "unpackb"]
