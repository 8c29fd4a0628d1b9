"""Child process of the format fault tests: reads damaged copies of a file and reports, per
copy, how the reader ended. Run as ``python -m tests.faults._format_probe KIND FILE...``.
Prints ``probe <file>`` before each read (so a crash names the copy that caused it), then
``ok <n>`` or ``error <type> <message>``."""

from __future__ import annotations

import sys


def _reader(kind: str, path: str):  # type: ignore[no-untyped-def]
    from dataflow import HDF5Data, LMDBData, LMDBSerializer, NumpySerializer, TFRecordData

    return {
        "lmdb": lambda: LMDBSerializer.load(path, shuffle=False),
        "lmdb-raw": lambda: LMDBData(path, shuffle=True, seed=0),
        "npz": lambda: NumpySerializer.load(path, shuffle=False),
        "npz-compressed": lambda: NumpySerializer.load(path, shuffle=False),
        "hdf5": lambda: HDF5Data(path, ["a", "b"], shuffle=False),
        "tfrecord": lambda: TFRecordData(path),
        "tfrecord-shuffled": lambda: TFRecordData(path, shuffle=True, seed=0),
    }[kind]()


def main() -> None:
    kind, paths = sys.argv[1], sys.argv[2:]
    for path in paths:
        print("probe", path, flush=True)
        try:
            df = _reader(kind, path)
            df.reset_state()
            n = sum(1 for _ in df)
            print("ok", n, flush=True)
        except Exception as e:  # noqa: BLE001 - the parent judges the type
            print("error", type(e).__name__, str(e).replace("\n", " ")[:300], flush=True)


if __name__ == "__main__":
    main()
