"""Real servers on 127.0.0.1 for the remote-reading tests, each recording what it was asked.

- :class:`S3Server`: moto's ``ThreadedMotoServer`` (the S3 API over HTTP, not mocked calls),
  its WSGI app wrapped so that every request is recorded server-side.
- :class:`HTTPFiles`: a ``ThreadingHTTPServer`` serving a folder with HEAD, byte ranges
  (``Range: bytes=a-b`` -> 206 + ``Content-Range``) and HTML folder listings (what fsspec's
  ``HTTPFileSystem`` needs for ``ls``/``glob``), and fault controls: added latency, the next
  GETs answering an error status, the next GETs dropping the connection without a response.
- :class:`MemoryStore`: a per-test folder of fsspec's ``memory://`` filesystem.

Nothing here reaches beyond the loopback interface.
"""

from __future__ import annotations

import html
import json
import logging
import os
import shutil
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import quote, unquote, urlsplit

#: The secret of every S3 test: distinctive, so tests can assert it never shows up.
SECRET = "testing-SECRET-xyz"
ACCESS_KEY = "testing"
REGION = "us-east-1"
_USER = "dataflow-tests"

#: The environment the S3 tests run in: credentials that the server refuses (a reader must
#: use ``storage_options``), no instance metadata lookup, no proxy for loopback, and nothing
#: of the machine's AWS setup. The conftest adds ``AWS_ENDPOINT_URL_S3`` (the local server),
#: so that a client built without our options fails here instead of reaching AWS.
AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "AKIA-NOT-A-TEST-KEY",
    "AWS_SECRET_ACCESS_KEY": "env-secret-not-used",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_REGION": REGION,
    "AWS_EC2_METADATA_DISABLED": "true",
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    "NO_PROXY": "127.0.0.1,localhost",
    "no_proxy": "127.0.0.1,localhost",
}
AWS_ENV_REMOVED = (
    "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN",
    "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CA_BUNDLE", "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
)


_S3_CODES = {503: "SlowDown", 500: "InternalError"}
_S3_ERROR = (
    '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
    "<Message>injected by the test server</Message><Resource>{path}</Resource></Error>"
)


class Request(NamedTuple):
    """One request as the server saw it. ``path`` is URL-decoded, without the query."""

    method: str
    path: str
    query: str
    range: str | None


class _Log:
    """A thread-safe list of :class:`Request`, with the questions tests ask of it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: list[Request] = []

    def add(self, request: Request) -> None:
        with self._lock:
            self._items.append(request)

    @property
    def requests(self) -> list[Request]:
        """A copy of every request recorded since the last :meth:`clear`."""
        with self._lock:
            return list(self._items)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def wait_idle(self, quiet: float = 0.3, timeout: float = 10.0) -> None:
        """Wait until no request has arrived for ``quiet`` seconds: the background fetches of
        an abandoned iterator have landed, and a :meth:`clear` after this sees none of them."""
        deadline = time.monotonic() + timeout
        seen, since = -1, time.monotonic()
        while time.monotonic() < deadline:
            with self._lock:
                now = len(self._items)
            if now != seen:
                seen, since = now, time.monotonic()
            elif time.monotonic() - since >= quiet:
                return
            time.sleep(0.02)

    def gets(self, prefix: str = "/") -> list[str]:
        """The paths of the GETs whose path starts with ``prefix``, in arrival order."""
        return [r.path for r in self.requests if r.method == "GET" and r.path.startswith(prefix)]


# -- S3 --------------------------------------------------------------------------------------


class S3Server(_Log):
    """moto's S3 server on ``127.0.0.1`` at a free port, checking every request's signature.

    ``endpoint`` is its URL; ``key`` the access key id of the one IAM user (allowed
    everything), whose secret is :data:`SECRET`; ``storage_options`` the fsspec/s3fs
    options that reach the server with them. A request signed with another secret is
    refused (403), as S3 does. :meth:`put` and :meth:`make_bucket` set up objects (through
    boto3, so their requests are recorded too: :meth:`clear` before what is measured);
    :attr:`requests` is every request the server received (path style: ``/bucket/key``).
    """

    def __init__(self) -> None:
        super().__init__()
        self._faults: list[int] = []
        self._fault_lock = threading.Lock()
        import boto3
        from moto import settings
        from moto.core import DEFAULT_ACCOUNT_ID
        from moto.core.authorization import ActionAuthenticatorMixin
        from moto.iam.models import iam_backends
        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one line per request otherwise
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self._server.start()
        # werkzeug's server calls ``server.app`` for each request: wrap it to record them
        wsgi = self._server._server
        assert wsgi is not None
        inner = wsgi.app

        def recording(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
            request = Request(
                environ["REQUEST_METHOD"], unquote(environ.get("PATH_INFO", "")),
                environ.get("QUERY_STRING", ""), environ.get("HTTP_RANGE"),
            )
            self.add(request)
            if request.method == "GET" and request.path.strip("/").count("/") >= 1:
                status = self._take_fault()
                if status is not None:
                    body = _S3_ERROR.format(code=_S3_CODES.get(status, "InternalError"), path=request.path)
                    start_response(f"{status} Injected", [("Content-Type", "application/xml"),
                                                          ("Content-Length", str(len(body)))])
                    return [body.encode()]
            return inner(environ, start_response)

        wsgi.app = recording
        host, port = self._server.get_host_and_port()
        self.endpoint = f"http://{host}:{port}"

        # An IAM user allowed everything, its key's secret set to ours (moto draws a random
        # one); then moto checks the signature of every request, as S3 does.
        iam = boto3.client("iam", endpoint_url=self.endpoint, region_name=REGION,
                           aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET)
        iam.create_user(UserName=_USER)
        iam.put_user_policy(UserName=_USER, PolicyName="everything", PolicyDocument=json.dumps(
            {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
        ))
        self.key: str = iam.create_access_key(UserName=_USER)["AccessKey"]["AccessKeyId"]
        iam.close()
        user = iam_backends[DEFAULT_ACCOUNT_ID]["aws"].get_user(_USER)
        (access_key,) = [k for k in user.access_keys if k.access_key_id == self.key]
        access_key.secret_access_key = SECRET
        self._auth_before = (settings.INITIAL_NO_AUTH_ACTION_COUNT, ActionAuthenticatorMixin.request_count)
        settings.INITIAL_NO_AUTH_ACTION_COUNT = 0
        ActionAuthenticatorMixin.request_count = 0

        self.storage_options: dict[str, Any] = {
            "key": self.key,
            "secret": SECRET,
            "client_kwargs": {"endpoint_url": self.endpoint, "region_name": REGION},
        }
        self._client = boto3.client(
            "s3", endpoint_url=self.endpoint, region_name=REGION,
            aws_access_key_id=self.key, aws_secret_access_key=SECRET,
        )

    def fail_next(self, n: int, status: int = 503) -> None:
        """The next ``n`` object GETs answer ``status`` with S3's error body (503: ``SlowDown``,
        500: ``InternalError``), before moto sees them."""
        with self._fault_lock:
            self._faults += [status] * n

    def _take_fault(self) -> int | None:
        with self._fault_lock:
            return self._faults.pop(0) if self._faults else None

    def clear_faults(self) -> None:
        """Forget the failures :meth:`fail_next` set up that no request has met yet."""
        with self._fault_lock:
            self._faults.clear()

    def options(self, **changes: Any) -> dict[str, Any]:
        """A copy of :attr:`storage_options` with ``changes`` (e.g. ``secret="wrong"``)."""
        return {**self.storage_options, "client_kwargs": dict(self.storage_options["client_kwargs"]),
                **changes}

    def make_bucket(self, name: str | None = None) -> str:
        """Create a bucket (a fresh unique name if none is given) and return its name."""
        name = name or f"b-{uuid.uuid4().hex[:16]}"
        self._client.create_bucket(Bucket=name)
        return name

    def put(self, bucket: str, key: str, data: bytes) -> str:
        """Store ``data`` as ``key`` in ``bucket``; return its ``s3://`` URL."""
        self._client.put_object(Bucket=bucket, Key=key, Body=data)
        return f"s3://{bucket}/{key}"

    def gets(self, prefix: str = "/") -> list[str]:
        """The paths (``/bucket/key``) of the object GETs under ``prefix`` (listings, which
        are GETs of the bucket with a query, excluded: see :meth:`listings`)."""
        return [r.path for r in self.requests
                if r.method == "GET" and r.path.startswith(prefix) and "list-type" not in r.query
                and r.path.strip("/").count("/") >= 1]

    def listings(self, bucket: str) -> list[Request]:
        """The list requests of ``bucket``."""
        return [r for r in self.requests if r.method == "GET" and r.path.strip("/") == bucket]

    def of_bucket(self, bucket: str) -> list[Request]:
        """Every request about ``bucket`` or its objects."""
        return [r for r in self.requests if r.path == f"/{bucket}" or r.path.startswith(f"/{bucket}/")]

    def stop(self) -> None:
        from moto import settings
        from moto.core.authorization import ActionAuthenticatorMixin

        self._client.close()
        self._server.stop()
        settings.INITIAL_NO_AUTH_ACTION_COUNT, ActionAuthenticatorMixin.request_count = self._auth_before


# -- HTTP ------------------------------------------------------------------------------------


class HTTPFiles(_Log):
    """A threaded HTTP server on ``127.0.0.1`` serving the folder :attr:`root`.

    Controls (thread-safe, for the next requests): :attr:`latency` seconds added before every
    answer; :meth:`fail_next` ``(n, status)`` makes the next ``n`` GETs answer ``status``;
    :meth:`drop_next` ``(n)`` makes the next ``n`` GETs close the connection without an answer
    (aiohttp itself sends a GET again once after such a drop: one failed fetch takes two).
    :attr:`requests` records every request as it arrives (faulty ones included).
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        super().__init__()
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.latency = 0.0
        self._spans: list[tuple[str, float, float]] = []  # (GET path, start, end)
        self._faults: list[int | None] = []  # per upcoming GET: a status, or None = drop
        self._fault_lock = threading.Lock()
        self._stopping = threading.Event()
        files = self

        class Handler(_FileHandler):
            owner = files

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="http-files", daemon=True)
        self._thread.start()
        host, port = self._server.server_address[:2]
        self.endpoint = f"http://{host}:{port}"

    def url(self, name: str) -> str:
        return f"{self.endpoint}/{quote(name)}"

    def put(self, name: str, data: bytes) -> str:
        """Write ``data`` as the file ``name`` (folders created); return its URL."""
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return self.url(name)

    def put_file(self, name: str, source: str | os.PathLike[str]) -> str:
        """Copy the local file ``source`` to ``name``; return its URL."""
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, path)
        return self.url(name)

    def fail_next(self, n: int, status: int = 503) -> None:
        with self._fault_lock:
            self._faults += [status] * n

    def drop_next(self, n: int) -> None:
        with self._fault_lock:
            self._faults += [None] * n

    def clear(self) -> None:
        super().clear()
        with self._fault_lock:
            self._spans.clear()

    def get_spans(self, suffix: str = "") -> list[tuple[str, float, float]]:
        """``(path, start, end)`` (``time.monotonic()``) of every GET answered whose path
        ends with ``suffix``."""
        with self._fault_lock:
            return [s for s in self._spans if s[0].endswith(suffix)]

    def max_concurrent(self, suffix: str = "") -> int:
        """The most GETs of paths ending with ``suffix`` that the server was answering at once."""
        events = sorted([(t0, 1) for _, t0, _ in self.get_spans(suffix)]
                        + [(t1, -1) for _, _, t1 in self.get_spans(suffix)])
        most = now = 0
        for _, delta in events:
            now += delta
            most = max(most, now)
        return most

    def pending_faults(self) -> int:
        with self._fault_lock:
            return len(self._faults)

    def _take_fault(self) -> tuple[bool, int | None]:
        with self._fault_lock:
            if not self._faults:
                return False, None
            return True, self._faults.pop(0)

    def stop(self) -> None:
        self._stopping.set()  # wakes handlers sleeping for latency
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)


class _FileHandler(BaseHTTPRequestHandler):
    owner: HTTPFiles
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def handle_one_request(self) -> None:
        try:
            super().handle_one_request()
        except (ConnectionError, BrokenPipeError):  # the client gave up (a timeout test)
            self.close_connection = True

    def _begin(self, method: str) -> Path | None:
        """Record the request, wait the latency, and apply a pending fault; the file asked
        for, or ``None`` if the request was answered already."""
        owner = self.owner
        split = urlsplit(self.path)
        owner.add(Request(method, unquote(split.path), split.query, self.headers.get("Range")))
        if owner.latency and owner._stopping.wait(owner.latency):
            self.close_connection = True
            return None
        if method == "GET":
            faulty, status = owner._take_fault()
            if faulty and status is None:
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)  # no status line at all: a dropped connection
                return None
            if faulty:
                assert status is not None
                self._send(status, b"injected failure\n", "text/plain")
                return None
        rel = unquote(split.path).lstrip("/")
        path = (owner.root / rel).resolve()
        if owner.root.resolve() not in (path, *path.parents):
            self._send(403, b"outside the served folder\n", "text/plain")
            return None
        if not path.exists():
            self._send(404, b"not found\n", "text/plain")
            return None
        return path

    def _send(self, status: int, body: bytes, ctype: str, headers: dict[str, str] | None = None,
              head: bool = False, length: int | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body) if length is None else length))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _listing(self, path: Path) -> bytes:
        links = "".join(
            f'<a href="{quote(p.name)}{"/" if p.is_dir() else ""}">{html.escape(p.name)}</a>\n'
            for p in sorted(path.iterdir())
        )
        return f"<html><body>\n{links}</body></html>\n".encode()

    def _serve(self, head: bool) -> None:
        path = self._begin("HEAD" if head else "GET")
        if path is None:
            return
        if path.is_dir():
            self._send(200, self._listing(path), "text/html", head=head)
            return
        data = path.read_bytes()
        size = len(data)
        base = {"Accept-Ranges": "bytes", "ETag": f'"{size}-{path.stat().st_mtime_ns}"'}
        spec = self.headers.get("Range")
        if spec is None:
            self._send(200, data, "application/octet-stream", base, head=head)
            return
        span = _parse_range(spec, size)
        if span is None:
            self._send(416, b"", "application/octet-stream", {**base, "Content-Range": f"bytes */{size}"},
                       head=head)
            return
        start, end = span
        self._send(206, data[start:end + 1], "application/octet-stream",
                   {**base, "Content-Range": f"bytes {start}-{end}/{size}"}, head=head)

    def do_GET(self) -> None:
        start = time.monotonic()
        try:
            self._serve(head=False)
        finally:
            with self.owner._fault_lock:
                self.owner._spans.append((unquote(urlsplit(self.path).path), start, time.monotonic()))

    def do_HEAD(self) -> None:
        self._serve(head=True)


def _parse_range(spec: str, size: int) -> tuple[int, int] | None:
    """``(first, last)`` byte (inclusive) of a single ``bytes=a-b`` / ``a-`` / ``-n`` range,
    clipped to the file, or ``None`` if it is not satisfiable."""
    unit, _, ranges = spec.partition("=")
    if unit.strip() != "bytes" or "," in ranges:
        return None
    first, _, last = ranges.strip().partition("-")
    try:
        if not first:  # the last n bytes
            n = int(last)
            return (max(0, size - n), size - 1) if n > 0 and size else None
        start = int(first)
        end = int(last) if last else size - 1
    except ValueError:
        return None
    if start >= size or end < start:
        return None
    return start, min(end, size - 1)


# -- memory:// -------------------------------------------------------------------------------


class MemoryStore:
    """A fresh folder of fsspec's process-wide ``memory://`` filesystem, removed by :meth:`clear`."""

    def __init__(self) -> None:
        from fsspec.implementations.memory import MemoryFileSystem

        self.fs = MemoryFileSystem()
        self.root = f"/t-{uuid.uuid4().hex[:12]}"

    def url(self, name: str) -> str:
        return f"memory://{self.root}/{name}"

    def put(self, name: str, data: bytes) -> str:
        """Store ``data`` as ``name``; return its ``memory://`` URL."""
        self.fs.pipe_file(f"{self.root}/{name}", data)
        return self.url(name)

    def put_file(self, name: str, source: str | os.PathLike[str]) -> str:
        return self.put(name, Path(source).read_bytes())

    def clear(self) -> None:
        if self.fs.exists(self.root):
            self.fs.rm(self.root, recursive=True)

