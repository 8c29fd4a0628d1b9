"""Child process of the fresh-process resume tests: builds the pipeline of a spec, loads a
state, and either runs the rest of the interrupted epoch and the later epochs, or (chain
mode, given where the state was cut and where to cut next) runs on to the next cut and saves
the state there, as a job preempted again would. Writes what it yielded (codec)."""

from __future__ import annotations

import json
import sys


def main() -> None:
    spec_path, state_path, out_path, epochs, workers = sys.argv[1:6]
    from dataflow import codec
    from tests.checkpoint._harness import advance, run_epochs
    from tests.checkpoint._spec_pipelines import build

    with open(spec_path) as f:
        spec = json.load(f)
    with open(state_path, "rb") as f:
        state = codec.loads(f.read())
    df = build(spec, int(workers) or None)
    df.load_state_dict(state)
    df.reset_state()
    if len(sys.argv) > 6:  # chain mode: at, to ("epoch,taken,live"), where to save the state
        at, to = (_position(p) for p in sys.argv[6:8])
        got: list[list[object]] = [[] for _ in range(int(epochs))]
        it = advance(df, at, to, got)
        with open(sys.argv[8], "wb") as f:
            f.write(codec.dumps(df.state_dict()))
        del it
    else:
        got = run_epochs(df, int(epochs))
    df.close()
    with open(out_path, "wb") as f:
        f.write(codec.dumps([[list(map(_plain, ep))] for ep in got]))


def _position(text: str) -> tuple[int, int, bool]:
    e, m, live = text.split(",")
    return int(e), int(m), live == "1"


def _plain(x: object) -> object:
    """The canonical form as plain data the codec carries (tuples become lists)."""
    if isinstance(x, tuple):
        return [_plain(v) for v in x]
    return x


if __name__ == "__main__":  # spawn workers import this module: the guard is required
    main()
