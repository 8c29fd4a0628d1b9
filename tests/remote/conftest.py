"""Fixtures of the remote-reading tests: real servers on 127.0.0.1 (see ``_servers.py``).

- ``s3`` (session): moto's S3 server checking signatures; the environment holds none of
  the machine's AWS setup, and credentials the server refuses (readers must use
  ``storage_options``); ``bucket`` (function): a fresh bucket in it, the
  server's request log cleared.
- ``http_files`` (function): an HTTP server over a fresh temporary folder, with latency,
  error and dropped-connection controls.
- ``memory_store`` (function): a fresh ``memory://`` folder, removed after the test.
- ``store`` (function, parametrized s3/http/memory): one folder of each, behind one interface.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ._servers import AWS_ENV, AWS_ENV_REMOVED, HTTPFiles, MemoryStore, S3Server
from ._stores import Store, make_store


@pytest.fixture(scope="session")
def s3() -> Iterator[S3Server]:
    with pytest.MonkeyPatch.context() as mp:
        for name in AWS_ENV_REMOVED:
            mp.delenv(name, raising=False)
        for name, value in AWS_ENV.items():
            mp.setenv(name, value)
        server = S3Server()
        mp.setenv("AWS_ENDPOINT_URL_S3", server.endpoint)
        _running.append(server)
        try:
            yield server
        finally:
            _running.remove(server)
            server.stop()


_running: list[S3Server] = []


@pytest.fixture(autouse=True)
def _s3_faults_end_with_the_test() -> Iterator[None]:
    """The S3 server lives for the session: failures a test set up but no request met must
    not reach the next test."""
    yield
    for server in _running:
        server.clear_faults()


@pytest.fixture
def bucket(s3: S3Server) -> str:
    """A new empty bucket; the server's request log starts empty after its creation."""
    name = s3.make_bucket()
    s3.clear()
    return name


@pytest.fixture
def http_files(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HTTPFiles]:
    server = HTTPFiles(tmp_path_factory.mktemp("http-root"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def memory_store() -> Iterator[MemoryStore]:
    store = MemoryStore()
    try:
        yield store
    finally:
        store.clear()



@pytest.fixture(params=["s3", "http", "memory"])
def store(request: pytest.FixtureRequest) -> Store:
    """A fresh folder in each store in turn (an S3 bucket, the HTTP server's root, a
    ``memory://`` folder), its request log empty."""
    kind = request.param
    if kind == "s3":
        return make_store("s3", s3=request.getfixturevalue("s3"))
    if kind == "http":
        return make_store("http", http=request.getfixturevalue("http_files"))
    return make_store("memory", memory=request.getfixturevalue("memory_store"))
