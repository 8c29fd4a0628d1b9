"""Storage formats against damaged and foreign files (fault-injection suite).

Promise: reading a truncated, bit-flipped or foreign file never crashes the process (no
SIGBUS/SIGSEGV) and never leaks a backend exception: it raises
:class:`~dataflow.formats.FormatError` naming the file (or, for a flipped bit inside a value
that no checksum covers, :class:`~dataflow.codec.CodecError` naming the record, or reads
data). Each format's damaged copies are read in a child process, so a crash fails one test
and names the copy that caused it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dataflow import DataFromList, HDF5Serializer, LMDBSerializer, NumpySerializer, TFRecordSerializer

ROOT = Path(__file__).resolve().parents[2]
N = 60


def _flow() -> DataFromList:
    rng = np.random.default_rng(0)
    return DataFromList([[rng.random(50).astype(np.float32), i] for i in range(N)], shuffle=False)


WRITERS = {
    "lmdb": lambda p: LMDBSerializer.save(_flow(), p),
    "npz": lambda p: NumpySerializer.save(_flow(), p),
    "npz-compressed": lambda p: NumpySerializer.save(_flow(), p, compressed=True),
    "hdf5": lambda p: HDF5Serializer.save(_flow(), p, ["a", "b"]),
    "tfrecord": lambda p: TFRecordSerializer.save(_flow(), p),
}
SUFFIX = {"lmdb": ".lmdb", "npz": ".npz", "npz-compressed": ".npz", "hdf5": ".h5", "tfrecord": ".tfrecord"}


def _probe(kind: str, paths: list[str]) -> list[tuple[str, str]]:
    """Read every path in one child; ``[(path, outcome line)]``; fails on a crash."""
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run(
        [sys.executable, "-m", "tests.faults._format_probe", kind, *paths],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    lines = proc.stdout.splitlines()
    last = next((ln for ln in reversed(lines) if ln.startswith("probe ")), "before any probe")
    crash = f"the reader crashed (exit {proc.returncode}) at {last}:\n{proc.stderr[-2000:]}"
    assert proc.returncode == 0, crash
    out, current = [], ""
    for ln in lines:
        if ln.startswith("probe "):
            current = ln[6:]
        else:
            out.append((current, ln))
    assert len(out) == len(paths), proc.stdout[-2000:]
    return out


def _copies(src: str, tmp: Path, kind: str, damage: str) -> list[str]:
    data_file = os.path.join(src, "data.mdb") if os.path.isdir(src) else src
    blob = Path(data_file).read_bytes()
    rng = np.random.default_rng(7)
    out = []
    if damage == "truncated":
        cuts = sorted({0, 1, 100, len(blob) // 2, len(blob) - 1, *rng.integers(1, len(blob), 12).tolist()})
        variants = [blob[:c] for c in cuts]
    else:  # bit flips
        variants = []
        for _ in range(16):
            b = bytearray(blob)
            for pos in rng.integers(0, len(b), 3).tolist():
                b[pos] ^= 1 << int(rng.integers(0, 8))
            variants.append(bytes(b))
    for i, v in enumerate(variants):
        p = tmp / f"{damage}{i}{SUFFIX[kind]}"
        p.write_bytes(v)
        if os.path.exists(src + ".index"):  # a TFRecord file's index travels with it
            shutil.copyfile(src + ".index", str(p) + ".index")
        out.append(str(p))
    return out


@pytest.fixture(scope="module")
def originals(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    tmp = tmp_path_factory.mktemp("originals")
    out = {}
    for kind, write in WRITERS.items():
        path = str(tmp / f"orig-{kind}{SUFFIX[kind]}")
        write(path)
        out[kind] = path
    return out


@pytest.mark.parametrize("kind", list(WRITERS))
def test_truncated_files_raise_format_error_naming_the_file(
    kind: str, originals: dict[str, str], tmp_path: Path
) -> None:
    """A file cut anywhere (an interrupted copy) raises FormatError naming it, never crashes."""
    paths = _copies(originals[kind], tmp_path, kind, "truncated")
    for path, outcome in _probe(kind, paths):  # TFRecord: its index knows the size
        assert outcome.startswith("error FormatError") and os.path.basename(path) in outcome, (path, outcome)


@pytest.mark.parametrize("kind", list(WRITERS))
def test_bit_flips_never_crash_or_leak_backend_errors(
    kind: str, originals: dict[str, str], tmp_path: Path
) -> None:
    """Flipped bits give FormatError (or CodecError naming the record, or data where no
    checksum covers the flipped byte); never a crash, never the backend's own exception."""
    paths = _copies(originals[kind], tmp_path, kind, "flipped")
    for path, outcome in _probe(kind, paths):
        ok = outcome.startswith(("ok ", "error FormatError", "error CodecError"))
        assert ok, (path, outcome)
        if outcome.startswith("error FormatError"):
            assert os.path.basename(path) in outcome, (path, outcome)


@pytest.mark.parametrize("kind", list(WRITERS))
def test_files_of_another_kind_raise_format_error(
    kind: str, originals: dict[str, str], tmp_path: Path
) -> None:
    """Every reader handed every other format's file (and random bytes) says FormatError."""
    paths = []
    for other, src in originals.items():
        if other.split("-")[0] == kind.split("-")[0]:  # npz and compressed npz: one reader
            continue
        data_file = os.path.join(src, "data.mdb") if os.path.isdir(src) else src
        dst = tmp_path / f"foreign-{other}{SUFFIX[kind]}"
        shutil.copyfile(data_file, dst)
        paths.append(str(dst))
    junk = tmp_path / f"junk{SUFFIX[kind]}"
    junk.write_bytes(np.random.default_rng(1).bytes(20_000))
    paths.append(str(junk))
    for path, outcome in _probe(kind, paths):
        assert outcome.startswith("error FormatError") and os.path.basename(path) in outcome, (path, outcome)


@pytest.mark.parametrize("kind", ["tfrecord", "tfrecord-shuffled"])
def test_damaged_tfrecord_index_raises_format_error(
    kind: str, originals: dict[str, str], tmp_path: Path
) -> None:
    """A truncated or bit-flipped index file beside an intact TFRecord file: FormatError naming
    a file, or correct data (a flipped offset is caught by the record's length CRC, in file
    order the offsets are not used); never a crash or a wrong record."""
    src = originals["tfrecord"]
    index = Path(src + ".index").read_bytes()
    rng = np.random.default_rng(11)
    paths = []
    for i in range(24):
        damaged = bytearray(index)
        if i < 6:
            damaged = damaged[: int(rng.integers(0, len(index)))]
        else:
            for pos in rng.integers(0, len(damaged), 2).tolist():
                damaged[pos] ^= 1 << int(rng.integers(0, 8))
        path = tmp_path / f"index{i}.tfrecord"
        shutil.copyfile(src, path)
        Path(str(path) + ".index").write_bytes(bytes(damaged))
        paths.append(str(path))
    for path, outcome in _probe(kind, paths):
        assert outcome == f"ok {N}" or outcome.startswith("error FormatError"), (path, outcome)
        if outcome.startswith("error FormatError"):
            assert os.path.basename(path) in outcome, (path, outcome)


def _probe_each(kind: str, paths: list[str]) -> tuple[list[tuple[str, str]], list[tuple[str, int]]]:
    """Read every path in as few children as possible: ``(outcomes, crashes)``; a child that
    crashes is replaced by a new one that goes on after the copy that crashed it."""
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    outcomes: list[tuple[str, str]] = []
    crashes: list[tuple[str, int]] = []
    todo = list(paths)
    while todo:
        proc = subprocess.run(
            [sys.executable, "-m", "tests.faults._format_probe", kind, *todo],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        current = ""
        for ln in proc.stdout.splitlines():
            if ln.startswith("probe "):
                current = ln[6:]
            else:
                outcomes.append((current, ln))
        done = {p for p, _ in outcomes}
        if proc.returncode == 0:
            break
        crashes.append((current, proc.returncode))
        todo = todo[todo.index(current) + 1 :] if current in todo else []
        assert current not in done
    return outcomes, crashes


@pytest.fixture(scope="module")
def flipped_lmdb(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """60 copies of a 300-record database, 8 random bits flipped in each (B-tree pages too)."""
    tmp = tmp_path_factory.mktemp("flipped-lmdb")
    src = str(tmp / "orig.lmdb")
    rows = [[np.random.default_rng(i).random(50).astype(np.float32), i] for i in range(300)]
    LMDBSerializer.save(DataFromList(rows, shuffle=False), src, progress=False)
    blob = Path(src).read_bytes()
    rng = np.random.default_rng(3)
    paths = []
    for k in range(60):
        b = bytearray(blob)
        for pos in rng.integers(0, len(b), 8).tolist():
            b[pos] ^= 1 << int(rng.integers(0, 8))
        path = tmp / f"flip{k}.lmdb"
        path.write_bytes(b)
        paths.append(str(path))
    return paths


@pytest.mark.parametrize("kind", ["lmdb", "lmdb-raw"])
def test_damaged_lmdb_pages_raise_format_error_not_lmdb_errors(kind: str, flipped_lmdb: list[str]) -> None:
    """A damaged B-tree page met while iterating (lmdb's CorruptedError, PageNotFoundError, a
    listed key without a value) raises FormatError naming the file, in order and shuffled;
    also where the cursor first walks down the tree (a node pointer of the first leaf page
    flipped: lmdb's error used to escape from there)."""
    folder = Path(flipped_lmdb[0]).parent
    pointer = _node_pointer_flipped(str(folder / "orig.lmdb"), folder / "pointer-inside.lmdb", False)
    outcomes, _ = _probe_each(kind, [*flipped_lmdb, pointer])
    assert outcomes[-1][1].startswith("error FormatError"), outcomes[-1]
    for path, outcome in outcomes:
        assert outcome.startswith(("ok ", "error FormatError", "error CodecError")), (path, outcome)
        if outcome.startswith("error FormatError"):
            assert os.path.basename(path) in outcome, (path, outcome)


def _node_pointer_flipped(src: str, dst: Path, past_the_end: bool) -> str:
    """A copy of ``src`` where one leaf page has its first node pointer's top bit set (one
    flipped bit, as in a damaged disk block), so that the node it points to lies 32 KiB
    further: a page near the end of the file (``past_the_end``: beyond the file) or the
    first leaf page (inside the file, on another page)."""
    import struct

    blob = bytearray(Path(src).read_bytes())
    psize, leaf = 4096, 0x02
    pages = range(len(blob) // psize - 1, 1, -1) if past_the_end else range(2, len(blob) // psize)
    page = next(
        p for p in pages
        if struct.unpack_from("<H", blob, p * psize + 10)[0] == leaf
        and ((p + 8) * psize > len(blob)) == past_the_end
    )  # fmt: skip
    pointer = struct.unpack_from("<H", blob, page * psize + 16)[0]
    struct.pack_into("<H", blob, page * psize + 16, pointer | 0x8000)
    dst.write_bytes(bytes(blob))
    return str(dst)


@pytest.mark.xfail(
    reason="known bug: LMDB does not check that a page's node pointers and node sizes stay "
    "inside the file; one that points past its end makes lmdb read unmapped file pages "
    "(SIGBUS) before any check of ours runs. Preventing it needs a walk over every page "
    "before reading (a full read of the file at open)",
    strict=True,
)
@pytest.mark.parametrize("kind", ["lmdb", "lmdb-raw"])
def test_damaged_lmdb_pages_never_crash(kind: str, flipped_lmdb: list[str]) -> None:
    """Promise: no damaged database kills the reading process. The random copies of the
    fixture happen not to crash; the constructed one does."""
    folder = Path(flipped_lmdb[0]).parent
    damaged = _node_pointer_flipped(str(folder / "orig.lmdb"), folder / "pointer-past-the-end.lmdb", True)
    _, crashes = _probe_each(kind, [*flipped_lmdb, damaged])
    assert crashes == []
