"""Where a reader's files live: :class:`ShardStorage` (local paths, or any fsspec URL).

Every file-reading source takes the same keyword arguments (:data:`STORAGE_ARGS`) and hands
them to one ``ShardStorage``; :doc:`/object_stores` is the user's side. Local paths keep the plain
``open`` (fsspec is not imported); URLs go through fsspec, imported when one is given.
"""

from __future__ import annotations

import errno
import functools
import glob as _glob
import io
import logging
import os
import random
import re
import threading
import time
from collections import deque
from collections.abc import Generator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import IO, Any, Union

from .._checks import check_int, check_timeout
from .._errors import FormatError
from ._common import require
from ._shard_cache import ShardCache

__all__ = ["STORAGE_ARGS", "PathSpec", "ShardStorage", "StorageReader", "is_remote", "redact"]

PathSpec = Union[str, "os.PathLike[str]", Sequence[Union[str, "os.PathLike[str]"]]]
STORAGE_ARGS = ("storage_options", "prefetch_shards", "cache_dir", "cache_limit", "retries", "timeout")

AUTO_FIRST_WINDOW = 2  # prefetch_shards="auto": files fetched at once at the start of an epoch,
AUTO_MOST_FILES = 16  # at most this many,
AUTO_MOST_BYTES = 512 << 20  # and no more bytes than this in flight (by the listed sizes)
_log = logging.getLogger("dataflow")
_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_GLOB = re.compile(r"[*?\[]")
_TRANSIENT_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
_TRANSIENT_CODES = frozenset(
    {
        "SlowDown",
        "Throttling",
        "ThrottlingException",
        "RequestTimeout",
        "InternalError",
        "ServiceUnavailable",
        "500",
        "502",
        "503",
        "504",
    }
)
_PERMANENT = (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError)


def redact(url: str) -> str:
    """``url`` as errors and logs show it: without ``user:password@`` and without the query
    string (where presigned URLs carry their signature)."""
    m = _URL.match(url)
    if m is None:
        return url
    rest = url[m.end() :]
    rest = rest.split("@", 1)[1] if "@" in rest.split("/", 1)[0] else rest
    return f"{m.group(1)}://{rest.split('?', 1)[0]}{'?...' if '?' in rest else ''}"


def is_remote(path: object) -> bool:
    """Whether ``path`` (a path, a URL, or a list of them) names a remote file."""
    entries = path if isinstance(path, (list, tuple)) else [path]
    return any(isinstance(e, str) and _is_url(e) for e in entries)


def _is_url(text: str) -> bool:
    m = _URL.match(text)
    return m is not None and m.group(1) != "file"


def _transient(error: BaseException) -> bool:
    """Whether a failed request may succeed when tried again."""
    if isinstance(error, _PERMANENT):
        return False
    status = getattr(error, "status", None)
    if isinstance(status, int):
        return status in _TRANSIENT_STATUS
    response = getattr(error, "response", None)
    if isinstance(response, dict):
        return str(response.get("Error", {}).get("Code", "")) in _TRANSIENT_CODES
    if isinstance(error, OSError) and error.errno == errno.EINVAL:  # a request the store refuses
        return False
    module = type(error).__module__.split(".")[0]
    return isinstance(error, (OSError, TimeoutError)) or module in ("aiohttp", "botocore", "aiobotocore")


class _Window(io.BytesIO):
    """The bytes of a file from byte ``base`` on, as a seekable file whose positions are the
    file's own (``tell()`` after reading ``k`` bytes is ``base + k``)."""

    def __init__(self, data: bytes, base: int) -> None:
        super().__init__(data)
        self.base = base

    def tell(self) -> int:
        return super().tell() + self.base

    def seek(self, pos: int, whence: int = 0) -> int:
        if whence == 0:
            if pos < self.base:
                raise OSError(f"cannot seek to byte {pos}: this copy of the file starts at byte {self.base}")
            pos -= self.base
        return super().seek(pos, whence) + self.base


class ShardStorage:
    """The files of one reader (*shards*): what they are, and fetching them.

    ``path`` is a local path, an fsspec URL (``s3://``, ``gs://``, ``az://``, ``https://``,
    ``hf://``, ``memory://``; ``file://`` is read as a local path), a list of them, or a glob
    (``*``, ``?``, ``[...]``; expanded once, here, sorted). The list is :attr:`urls`.

    Remote files are fetched whole (one request; from the resume offset for the first file
    of a resumed epoch) by background threads ahead of the reader, so a store's latency is
    hidden behind the reading of the files before: ``prefetch_shards`` files at once, or
    with ``"auto"`` two at first and twice as many each time the reader has to wait for a
    file (up to :data:`AUTO_MOST_FILES` files and :data:`AUTO_MOST_BYTES` bytes in flight).
    Each request has ``timeout`` seconds (a dead connection never hangs a reader); transient failures
    (timeouts, dropped connections, HTTP 408/429/5xx, S3 ``SlowDown``) are tried again up to
    ``retries`` times with exponential backoff and jitter, counted in :meth:`io_stats` and
    logged once. A missing object raises :class:`FileNotFoundError`, a denied one
    :class:`PermissionError`, an object whose size differs from its listing
    :class:`~dataflow.FormatError`, each naming the URL without credentials.

    With ``cache_dir`` each fetched file is kept there (see :class:`ShardCache`: at most
    ``cache_limit`` bytes, one download per file per node, shared by the node's processes).
    ``storage_options`` go to fsspec as they are; they never appear in a ``repr``, an error,
    a log line or a state. Thread-safe; after ``fork`` each process opens its own
    connections (fsspec's filesystems are per process) and counts its own requests.
    """

    def __init__(
        self,
        stage: str,
        path: PathSpec,
        *,
        storage_options: Mapping[str, Any] | None = None,
        prefetch_shards: int | str = "auto",
        cache_dir: str | os.PathLike[str] | None = None,
        cache_limit: int | None = None,
        retries: int = 5,
        timeout: float | None = 60.0,
        name: str = "path",
    ) -> None:
        self.stage = stage
        if storage_options is not None and not isinstance(storage_options, Mapping):
            raise TypeError(
                f"{stage}: storage_options must be a dict or None, got {type(storage_options).__name__}"
            )
        if prefetch_shards != "auto" and (
            isinstance(prefetch_shards, bool) or not isinstance(prefetch_shards, int) or prefetch_shards < 0
        ):
            raise ValueError(
                f"{stage}: prefetch_shards must be 'auto' or an int >= 0, got {prefetch_shards!r}"
            )
        if cache_limit is not None:
            check_int(stage, "cache_limit (bytes)", cache_limit)
            if cache_dir is None:
                raise ValueError(f"{stage}: cache_limit={cache_limit} needs cache_dir=, the folder it bounds")
        self._options = dict(storage_options or {})
        self.prefetch_shards = prefetch_shards
        self.retries = check_int(stage, "retries", retries, minimum=0)
        self.timeout = check_timeout(stage, timeout)
        self._cache = ShardCache(os.fspath(cache_dir), cache_limit) if cache_dir is not None else None
        self._lock = threading.Lock()
        self._stats = {"requests": 0, "bytes": 0, "retries": 0, "cache_hits": 0}
        self._logged_retry = False
        self.urls, self.sizes = self._resolve(path, name)
        self.remote = any(_is_url(u) for u in self.urls)

    @classmethod
    def single(cls, stage: str, path: str, name: str, storage: Mapping[str, Any]) -> ShardStorage:
        """The storage of a reader of one file, from the reader's ``**storage`` keyword
        arguments (only :data:`STORAGE_ARGS`; a glob must match exactly one file)."""
        unknown = sorted(set(storage) - set(STORAGE_ARGS))
        if unknown:
            raise TypeError(
                f"{stage}: unexpected keyword argument {unknown[0]!r}; the options of remote files "
                f"are {', '.join(STORAGE_ARGS)}"
            )
        made = cls(stage, path, name=name, **storage)
        if len(made.urls) != 1:
            raise ValueError(
                f"{stage}: {name} must name one file, but {redact(path)!r} matches {len(made.urls)}"
            )
        return made

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        del state["_lock"]
        state.pop("_filesystems", None)  # connections stay in their process
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        shown = ", ".join(redact(u) for u in self.urls[:3]) + (", ..." if len(self.urls) > 3 else "")
        return f"ShardStorage([{shown}], {len(self.urls)} files)"

    # -- the list of files -------------------------------------------------------------------

    def _resolve(self, path: PathSpec, name: str) -> tuple[list[str], list[int | None]]:
        stage = self.stage
        entries = [path] if isinstance(path, (str, os.PathLike)) else path
        if isinstance(entries, (bytes, Mapping)) or not isinstance(entries, Sequence) or not entries:
            raise TypeError(
                f"{stage}: {name} must be a path, a URL, a glob or a non-empty list of them, "
                f"got {type(path).__name__} ({path!r})"
            )
        urls: list[str] = []
        sizes: list[int | None] = []
        for entry in entries:
            if not isinstance(entry, (str, os.PathLike)):
                raise TypeError(
                    f"{stage}: each path must be a str or os.PathLike, got {type(entry).__name__} ({entry!r})"
                )
            text = os.fspath(entry)
            if text.startswith("file://"):
                text = text[len("file://") :]
            literal = not _is_url(text) and os.path.exists(text)  # a file named like a glob
            if literal or not _GLOB.search(text.split("?", 1)[0] if _is_url(text) else text):
                urls.append(text)
                sizes.append(None)
            elif not _is_url(text):
                found = sorted(_glob.glob(text))
                if not found:
                    raise FileNotFoundError(f"{stage}: no file matches {text!r}")
                urls += found
                sizes += [None] * len(found)
            else:
                listed = self._glob(text)
                urls += [u for u, _ in listed]
                sizes += [s for _, s in listed]
        return urls, sizes

    def _glob(self, pattern: str) -> list[tuple[str, int | None]]:
        fs, path = self._fs(pattern)
        self._count(requests=1)
        try:
            found = fs.glob(path, detail=True)
        except Exception as e:
            raise OSError(f"{self.stage}: cannot list {redact(pattern)}: {type(e).__name__}") from e
        files = sorted((p, info) for p, info in found.items() if info.get("type", "file") != "directory")
        if not files:
            files = self._literal(fs, path)  # an object named like a glob (``part[1].tar``)
        if not files:
            raise FileNotFoundError(f"{self.stage}: no object matches {redact(pattern)}")
        out = []
        for p, info in files:
            size = info.get("size")
            out.append((fs.unstrip_protocol(p), int(size) if isinstance(size, int) else None))
        return out

    def _literal(self, fs: Any, path: str) -> list[tuple[str, dict[str, Any]]]:
        """``[(path, info)]`` if an object is named exactly ``path``, else ``[]`` (one request)."""
        self._count(requests=1)
        try:
            info = fs.info(path)
        except Exception:  # noqa: BLE001 - not there (or not listable): the glob's error stands
            return []
        return [] if info.get("type", "file") == "directory" else [(path, info)]

    def _fs(self, url: str) -> tuple[Any, str]:
        """The filesystem of ``url`` (one per protocol and process) and the path in it."""
        fsspec_core = require("fsspec.core", "remote", self.stage)
        protocol = url.split("://", 1)[0]
        known: tuple[int, dict[str, Any]] | None = self.__dict__.get("_filesystems")
        if known is None or known[0] != os.getpid():
            known = (os.getpid(), {})
            self.__dict__["_filesystems"] = known
        fs = known[1].get(protocol)
        if fs is None:
            options = self._options
            s3 = protocol in ("s3", "s3a")
            if s3:  # s3fs's and botocore's own retries would hide the retries we count
                config = {"retries": {"total_max_attempts": 1}, **options.get("config_kwargs", {})}
                options = {**options, "config_kwargs": config}  # keyed apart from the user's own instance
            fs = fsspec_core.url_to_fs(url, **options)[0]
            if s3:
                fs.retries = 1
            known[1][protocol] = fs
        return fs, fs._strip_protocol(url)

    # -- fetching ----------------------------------------------------------------------------

    def io_stats(self) -> dict[str, int]:
        """``requests`` made, ``bytes`` received, ``retries`` and ``cache_hits`` of this
        process (since the flow was built, or since this process was forked)."""
        with self._lock:
            return dict(self._stats)

    def _count(self, **deltas: int) -> None:
        with self._lock:
            for key, value in deltas.items():
                self._stats[key] += value

    def fetch(self, index: int, start: int = 0, end: int | None = None) -> bytes:
        """The bytes ``start`` to ``end`` (default: its end) of file ``index`` (one ranged
        request, retried as the class says)."""
        url = self.urls[index]
        if not _is_url(url):
            with self.open_local(url) as f:
                f.seek(start)
                return f.read() if end is None else f.read(max(0, end - start))
        size = self.sizes[index]
        stop = end if end is not None else size
        if stop is not None and stop <= start:
            return b""  # nothing to fetch: no request
        fs, path = self._fs(url)
        kwargs = {"timeout": self.timeout} if getattr(fs, "async_impl", False) else {}
        attempt = 0
        while True:
            self._count(requests=1)
            try:
                data = fs.cat_file(path, start=start, end=end, **kwargs)  # a Range: no size lookup first
                break
            except Exception as e:
                if _range_past_end(e):  # nothing from ``start`` on (an empty object, or its end)
                    data = b""
                    break
                if not _transient(e):
                    raise self._refused(url, e, "cannot read") from None
                if attempt >= self.retries:
                    kind = TimeoutError if isinstance(e, TimeoutError) else ConnectionError
                    raise kind(
                        f"{self.stage}: {redact(url)}: gave up after {attempt + 1} attempts "
                        f"(last: {_describe(e)}); raise retries= or timeout= if the store is slow"
                    ) from None
                self._retry_wait(url, e, attempt)
                attempt += 1
        data = bytes(data)
        self._count(bytes=len(data))
        if stop is not None and len(data) != stop - start:
            raise FormatError(
                f"{self.stage}: {redact(url)} changed while being read: bytes {start} to {stop} were "
                f"asked for (its listing said {size} bytes), {len(data)} came"
            )
        return data

    def _retry_wait(self, url: str, error: BaseException, attempt: int) -> None:
        with self._lock:
            self._stats["retries"] += 1
            first, self._logged_retry = not self._logged_retry, True
        if first:
            _log.warning(
                "%s: %s failed (%s); retrying with backoff (further retries are counted in io_stats())",
                self.stage,
                redact(url),
                _describe(error),
            )
        time.sleep(min(8.0, 0.05 * 2**attempt) * (0.5 + random.random()))

    def open(self, index: int, start: int = 0, end: int | None = None, ahead: bool = False) -> IO[bytes]:
        """File ``index`` as a seekable binary file positioned at byte ``start`` (whose
        ``tell()`` gives positions in the whole file); a remote file is fetched from ``start``
        to ``end`` (default: its end), a cached or local one is opened whole. ``ahead``: fetched
        before its use, kept in the cache until :meth:`_started` (see :class:`ShardCache`)."""
        url = self.urls[index]
        if not _is_url(url):
            f = self.open_local(url)
            if start:
                f.seek(start)
            return f
        if self._cache is not None:
            cached, hit = self._cache.get(url, self.sizes[index], lambda: self.fetch(index, 0), ahead)
            if hit:
                self._count(cache_hits=1)
            cached.seek(start)
            return cached
        return _Window(self.fetch(index, start, end), start)

    def open_local(self, path: str) -> IO[bytes]:
        """Local file ``path``, opened for reading; a missing file or a directory is the same
        ``OSError`` subclass with a message naming the stage and the path."""
        try:
            return open(path, "rb", buffering=1 << 20)  # noqa: SIM115 - the caller closes it
        except FileNotFoundError:
            raise FileNotFoundError(f"{self.stage}: no such file: {path!r}") from None
        except IsADirectoryError:
            raise IsADirectoryError(f"{self.stage}: {path!r} is a directory, not a file") from None

    def iterate(
        self,
        order: Sequence[int],
        starts: Sequence[int] | None = None,
        ends: Sequence[int | None] | None = None,
    ) -> Generator[tuple[int, IO[bytes]], None, None]:
        """``(index, file)`` for each file of ``order``, opened (see :meth:`open`) at the
        byte ``starts[k]`` (default 0) up to ``ends[k]`` (default: the end), each closed when
        the next is asked for or the iterator is closed; remote files are fetched up to
        ``prefetch_shards`` ahead, in the background."""
        begin = list(starts) if starts is not None else [0] * len(order)
        stop = list(ends) if ends is not None else [None] * len(order)
        if not self.remote or self.prefetch_shards == 0:
            for index, start, end in zip(order, begin, stop):
                with self.open(index, start, end) as f:
                    yield index, f
            return
        auto = self.prefetch_shards == "auto"
        window = AUTO_FIRST_WINDOW if auto else int(self.prefetch_shards)
        most = self._most_in_flight(order) if auto else window
        pool = ThreadPoolExecutor(most, thread_name_prefix=f"{self.stage}-fetch")
        pending: deque[tuple[int, Future[IO[bytes]]]] = deque()
        upcoming = iter(zip(order, begin, stop))
        try:
            while True:
                while len(pending) < window:
                    nxt = next(upcoming, None)
                    if nxt is None:
                        break
                    pending.append((nxt[0], pool.submit(self.open, *nxt, True)))
                if not pending:
                    return
                index, future = pending.popleft()
                if auto and not future.done() and window < most:
                    window = min(most, 2 * window)  # the reader waits for the store: fetch more at once
                with future.result() as f:
                    self._started(index)
                    yield index, f
        finally:
            for index, future in pending:
                if not future.cancel():  # fetching or fetched: close it and let it be evicted
                    future.add_done_callback(functools.partial(self._drop_fetched, index))
            pool.shutdown(wait=False, cancel_futures=True)

    def _started(self, index: int) -> None:
        """A file fetched ahead is read now: the cache counts it as used (and unpins it)."""
        if self._cache is not None and _is_url(self.urls[index]):
            self._cache.used(self.urls[index], self.sizes[index])

    def _drop_fetched(self, index: int, future: Future[IO[bytes]]) -> None:
        """A file fetched ahead that will not be read (the epoch stopped): closed, unpinned."""
        if future.cancelled() or future.exception() is not None:
            return  # nothing opened (a failed fetch unpinned itself)
        future.result().close()
        if self._cache is not None and _is_url(self.urls[index]):
            self._cache.unpin(self.urls[index], self.sizes[index])

    def _most_in_flight(self, order: Sequence[int]) -> int:
        """How many files ``prefetch_shards="auto"`` may fetch at once: at most
        :data:`AUTO_MOST_FILES`, and as many of the largest listed file as fit in
        :data:`AUTO_MOST_BYTES` (files of unknown size count as 64 MiB)."""
        largest = max((self.sizes[i] or 64 << 20 for i in order), default=0)
        return max(1, min(AUTO_MOST_FILES, AUTO_MOST_BYTES // max(largest, 1)))

    def size(self, index: int) -> int:
        """The size in bytes of file ``index``: from its listing (a glob), the disk, or one
        request to the store (kept for the next call)."""
        url, known = self.urls[index], self.sizes[index]
        if known is not None:
            return known
        if not _is_url(url):
            try:
                return os.path.getsize(url)
            except FileNotFoundError:
                raise FileNotFoundError(f"{self.stage}: no such file: {url!r}") from None
        fs, path = self._fs(url)
        self._count(requests=1)
        try:
            found = int(fs.size(path))
        except Exception as e:
            raise self._refused(url, e, "cannot read the size of") from None
        self.sizes[index] = found
        return found

    def _refused(self, url: str, error: Exception, doing: str) -> OSError:
        """The error to raise for a request the store answered with ``error`` and that
        trying again will not fix: it names the URL without credentials, never the
        original message (which may hold them)."""
        if isinstance(error, FileNotFoundError):
            return FileNotFoundError(f"{self.stage}: no such object: {redact(url)}")
        if isinstance(error, PermissionError):
            return PermissionError(
                f"{self.stage}: access denied to {redact(url)}; check the credentials in storage_options"
            )
        return OSError(f"{self.stage}: {doing} {redact(url)}: {_describe(error)}")

    def fetch_sibling(self, index: int, suffix: str) -> bytes | None:
        """The bytes of the file named like file ``index`` plus ``suffix`` (an index file
        beside a shard), or ``None`` if there is none. One request, retried like
        :meth:`fetch`; kept in ``cache_dir`` when there is one (fetched once per node)."""
        url = self.urls[index]
        if not _is_url(url):
            try:
                with open(url + suffix, "rb") as f:
                    return f.read()
            except FileNotFoundError:
                return None
        sibling = ShardStorage.__new__(ShardStorage)
        sibling.__dict__.update(self.__dict__)
        sibling.urls, sibling.sizes = [url + suffix], [None]
        try:
            if self._cache is None:
                return sibling.fetch(0)
            with sibling.open(0) as f:
                return f.read()
        except FileNotFoundError:
            return None


class StorageReader:
    """What a flow reading the files of one :class:`ShardStorage` (``self._storage``) adds to
    its API."""

    _storage: ShardStorage

    def io_stats(self) -> dict[str, int]:
        """``requests``, ``bytes`` (received), ``retries`` and ``cache_hits`` of this process's
        reads of remote files (all zero for local files)."""
        return self._storage.io_stats()


def _range_past_end(error: BaseException) -> bool:
    """Whether a ranged request failed because the object has no byte at the range's start
    (HTTP 416; S3's ``InvalidRange``, which s3fs raises as an ``OSError``)."""
    if getattr(error, "status", None) == 416:
        return True
    text = f"{error} {error.__cause__ or ''}"
    return "InvalidRange" in text or "range is not satisfiable" in text.lower()


def _describe(error: BaseException) -> str:
    """The error's type and status, never its message (which may hold a URL with credentials)."""
    status = getattr(error, "status", None)
    code = getattr(error, "errno", None)
    detail = f" {status}" if isinstance(status, int) else f" errno {code}" if isinstance(code, int) else ""
    return f"{type(error).__name__}{detail}"
