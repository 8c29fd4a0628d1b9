"""Child process of the fresh-process resume test: builds the pipeline of a spec, loads a
state, runs the rest of the interrupted epoch and the later epochs, writes them (codec)."""

from __future__ import annotations

import json
import sys


def main() -> None:
    spec_path, state_path, out_path, epochs, workers = sys.argv[1:6]
    from dataflow import codec
    from tests.checkpoint._harness import run_epochs
    from tests.checkpoint._spec_pipelines import build

    with open(spec_path) as f:
        spec = json.load(f)
    with open(state_path, "rb") as f:
        state = codec.loads(f.read())
    df = build(spec, int(workers) or None)
    df.load_state_dict(state)
    df.reset_state()
    got = run_epochs(df, int(epochs))
    df.close()
    with open(out_path, "wb") as f:
        f.write(codec.dumps([[list(map(_plain, ep))] for ep in got]))


def _plain(x: object) -> object:
    """The canonical form as plain data the codec carries (tuples become lists)."""
    if isinstance(x, tuple):
        return [_plain(v) for v in x]
    return x


if __name__ == "__main__":  # spawn workers import this module: the guard is required
    main()
