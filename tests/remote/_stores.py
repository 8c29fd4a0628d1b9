"""One interface over the three stores the reader tests run against (``s3://`` on moto,
``http://`` on the local server, ``memory://``), and the datasets the tests put there."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

import dataflow as D

from ._servers import HTTPFiles, MemoryStore, S3Server


class Store:
    """A folder of one store: :meth:`put` files there, :meth:`url` names them, ``options``
    is what a reader's ``storage_options=`` needs to reach it, and :meth:`gets` lists the
    objects the server was asked for (``None`` for ``memory://``, which has no server)."""

    def __init__(self, kind: str, server: Any, bucket: str | None = None) -> None:
        self.kind, self.server, self.bucket = kind, server, bucket
        if kind == "s3":
            self.prefix = f"s3://{bucket}/"
            self.options: dict[str, Any] | None = server.storage_options
        elif kind == "http":
            self.prefix = server.endpoint + "/"
            self.options = None
        else:
            self.prefix = f"memory://{server.root}/"
            self.options = None

    def __repr__(self) -> str:
        return f"Store({self.kind})"

    def url(self, name: str) -> str:
        return self.prefix + name

    def put(self, name: str, data: bytes) -> str:
        if self.kind == "s3":
            return self.server.put(self.bucket, name, data)
        return self.server.put(name, data)

    def put_file(self, name: str, path: str | os.PathLike[str]) -> str:
        return self.put(name, Path(path).read_bytes())

    def clear_log(self) -> None:
        if self.kind != "memory":
            self.server.clear()

    def gets(self) -> list[str] | None:
        """The names (relative to this folder) of the objects GET'd since the last clear, in
        arrival order, repeats kept."""
        if self.kind == "memory":
            return None
        root = f"/{self.bucket}/" if self.kind == "s3" else "/"
        return [p[len(root):] for p in self.server.gets(root)]

    def requests(self) -> int | None:
        """How many requests the server received about this folder since the last clear."""
        if self.kind == "memory":
            return None
        if self.kind == "s3":
            return len(self.server.of_bucket(self.bucket))
        return len(self.server.requests)


def make_store(kind: str, s3: S3Server | None = None, http: HTTPFiles | None = None,
               memory: MemoryStore | None = None) -> Store:
    if kind == "s3":
        assert s3 is not None
        bucket = s3.make_bucket()
        store = Store("s3", s3, bucket)
    elif kind == "http":
        store = Store("http", http)
    else:
        store = Store("memory", memory)
    store.clear_log()
    return store


# -- datasets ---------------------------------------------------------------------------------


def record(shard: int, i: int) -> list[Any]:
    """Datapoint ``i`` of shard ``shard``: says where it comes from, with an array too."""
    return [shard, i, f"shard{shard}-rec{i}", np.arange(i % 4, dtype=np.int32)]


def write_tfrecord_shards(folder: Path, counts: Sequence[int], stem: str = "train") -> list[Path]:
    """TFRecord files ``<stem>-00.tfrecord``... (each with its ``.index``) in ``folder``, file
    ``s`` holding ``record(s, 0..counts[s]-1)``."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for s, n in enumerate(counts):
        path = folder / f"{stem}-{s:02d}.tfrecord"
        D.TFRecordSerializer.save(D.DataFromIterable([record(s, i) for i in range(n)]), str(path),
                                  progress=False)
        paths.append(path)
    return paths


def upload_shards(store: Store, paths: Sequence[Path], index: bool = True, folder: str = "") -> list[str]:
    """Upload each file (and its ``.index`` with ``index=True``); the files' URLs."""
    urls = []
    for path in paths:
        urls.append(store.put_file(folder + path.name, path))
        if index:
            store.put_file(folder + path.name + ".index", str(path) + ".index")
    return urls


def plain(value: Any) -> Any:
    """``value`` with arrays and numpy scalars made comparable with ``==`` (dtype kept)."""
    if isinstance(value, np.ndarray):
        return ("ndarray", value.dtype.str, value.shape, value.tolist())
    if isinstance(value, np.generic):
        return ("scalar", value.dtype.str, value.item())
    if isinstance(value, (list, tuple)):
        return type(value)(plain(v) for v in value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def epochs(flow: D.DataFlow[Any], n: int = 1) -> list[list[Any]]:
    """``reset_state()`` once, then ``n`` epochs, each a list of plain datapoints."""
    flow.reset_state()
    return [[plain(dp) for dp in flow] for _ in range(n)]


def epoch(flow: D.DataFlow[Any]) -> list[Any]:
    return epochs(flow, 1)[0]
