"""The LMDB save path: values are copied once into a reused buffer, transactions stay small,
the map grows ahead of the data, and a transaction that fills the map anyway is written
again from the buffer it still holds (no record lost or changed)."""

from __future__ import annotations

import contextlib
from pathlib import Path

import lmdb
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dataflow import LMDBSerializer, codec
from dataflow.base import DataFlow
from dataflow.formats._lmdb_env import BatchWriter


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.integers(0, 3000), min_size=1, max_size=30),
    st.integers(1, 7),
    st.integers(1, 9000),
    st.booleans(),
)
def test_every_value_is_written_intact(sizes: list[int], max_entries: int, arena: int, ahead: bool) -> None:
    """Whatever the value sizes, transaction length and buffer size (values bigger than the
    buffer included), each key holds exactly the bytes of its parts, in a tiny map that must
    grow: ahead of the data, or (``ahead=False``) by writing a full transaction again."""
    import tempfile

    from dataflow.formats import _lmdb_env

    grow = _lmdb_env.ensure_room
    if not ahead:
        _lmdb_env.ensure_room = lambda env, pending: None  # type: ignore[assignment]
    with contextlib.ExitStack() as stack:
        stack.callback(setattr, _lmdb_env, "ensure_room", grow)
        tmp = stack.enter_context(tempfile.TemporaryDirectory())
        env = lmdb.open(f"{tmp}/db", subdir=False, map_size=1 << 15, lock=False)
        try:
            writer = BatchWriter(lmdb, env, max_entries, arena=arena)
            rng = np.random.default_rng(len(sizes))
            want = {}
            for i, n in enumerate(sizes):
                parts = [b"h%d" % i, rng.integers(0, 256, n, dtype=np.uint8).data, b"t"]
                want[b"%06d" % i] = b"".join(bytes(p) for p in parts)
                writer.put(b"%06d" % i, parts)
            writer.flush()
            with env.begin() as txn:
                got = dict(txn.cursor())
        finally:
            env.close()
    assert got == want


class _SameArray(DataFlow):
    """Yields ``[i, arr]`` with one array object changed in place each time (as flows that
    reuse their buffers do): what is saved must be each datapoint's value at yield time."""

    def __init__(self, n: int, size: int) -> None:
        self.n, self.arr = n, np.zeros(size, np.uint8)

    def __len__(self) -> int:
        return self.n

    def __iter__(self):  # type: ignore[no-untyped-def]
        for i in range(self.n):
            self.arr[:] = i % 256
            yield [i, self.arr]


def test_save_of_a_flow_reusing_its_array_keeps_each_value(tmp_path: Path) -> None:
    path = str(tmp_path / "x.lmdb")
    LMDBSerializer.save(_SameArray(40, 50_000), path, write_frequency=7, map_size=1 << 16, progress=False)
    df = LMDBSerializer.load(path, shuffle=False)
    df.reset_state()
    got = list(df)
    assert [dp[0] for dp in got] == list(range(40))
    assert all((dp[1] == i % 256).all() and dp[1].shape == (50_000,) for i, dp in enumerate(got))


def test_dumps_parts_join_to_dumps() -> None:
    dp = [1, np.arange(6).reshape(2, 3), (b"x", {"k": np.float32(2)}), np.zeros((0, 4))]
    assert b"".join(bytes(memoryview(p)) for p in codec.dumps_parts(dp)) == codec.dumps(dp)


def test_saved_file_is_cut_to_its_pages_not_the_map_size(tmp_path: Path) -> None:
    """The writer maps the file writable (LMDB's writemap grows it to the map size, sparse);
    the saved file holds only LMDB's pages, and reads back whole."""
    path = tmp_path / "small.lmdb"
    LMDBSerializer.save(_SameArray(30, 1000), str(path), map_size=1 << 30, progress=False)
    assert path.stat().st_size < 200_000  # 30 x ~1 KB, not the 1 GiB map
    df = LMDBSerializer.load(str(path), shuffle=True, seed=0)
    df.reset_state()
    assert sorted(dp[0] for dp in df) == list(range(30))
