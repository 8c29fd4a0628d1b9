"""The command line: ``python -m dataflow bench [--pipeline module:function] [--size N]
[--warmup N] [--profile] [--no-progress]``, ``python -m dataflow profile [--pipeline
module:function] [--size N] [--warmup N] [--trace out.json]``, ``python -m dataflow tune
--pipeline module:function [--size N] [--warmup N] [--trace out.json] [--ram-budget SIZE]``, and ``python -m
dataflow --version``.

``bench`` measures a pipeline's throughput with :class:`~dataflow.tools._speed.TestDataSpeed`
(and, with ``--profile``, its per-stage breakdown with :func:`~dataflow.tools._profiling.profile`)
and prints the results. Exit status: 0 on success, 2 on a usage error (bad arguments, a
``--pipeline`` that does not lead to a DataFlow), 1 if the pipeline itself raises.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from contextlib import closing
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dataflow.base import DataFlow

DEMO = "dataflow.tools._demo:demo_pipeline"


def _count(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an int, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        return value

    return parse


def _size(text: str) -> int:
    """``--ram-budget``: bytes, or a size such as ``4GiB`` or ``512MB``."""
    from dataflow.parallel._budget import parse_bytes

    try:
        return parse_bytes("tune", "--ram-budget", text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _version() -> str:
    """``dataflow-ml X.Y.Z (python A.B.C, numpy N)``: what a bug report needs."""
    import platform

    import numpy

    from dataflow import __version__

    return f"dataflow-ml {__version__} (python {platform.python_version()}, numpy {numpy.__version__})"


#: each command: (its help, its description, --pipeline's help, (--size, its help), (--warmup, its help))
_COMMANDS: dict[str, tuple[str, str, str, tuple[int, str], tuple[int, str]]] = {
    "bench": (
        "measure the throughput of a pipeline",
        "Measure how many datapoints per second a pipeline produces.",
        "a function returning the DataFlow to measure, e.g. mypkg.data:train_flow "
        f"(default: the built-in demo, {DEMO})",
        (1000, "datapoints to time"),
        (10, "datapoints to draw before timing"),
    ),
    "profile": (
        "time each stage of a pipeline; optionally write a Chrome trace",
        "Time each stage of a pipeline's in-process chain, name the slowest, and with --trace "
        "write a Chrome trace (Perfetto / chrome://tracing): one track per stage and worker.",
        f"a function returning the DataFlow to profile (default: {DEMO})",
        (2000, "datapoints to time"),
        (100, "datapoints drawn first"),
    ),
    "tune": (
        "search the best num_proc/buffer_size of a pipeline's process maps",
        "Time a pipeline's process maps with num_proc/buffer_size 'auto' and a grid of fixed "
        "values; print the rates, the best configuration and its per-stage times.",
        "a function building a fresh DataFlow on every call",
        (2000, "datapoints timed per configuration"),
        (100, "datapoints drawn first, untimed"),
    ),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m dataflow", description="Tools for dataflow pipelines.")
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    cmds = {}
    for name, (help_, description, pipeline, size, warmup) in _COMMANDS.items():
        cmd = cmds[name] = sub.add_parser(name, help=help_, description=description)
        cmd.add_argument("--pipeline", default=DEMO, metavar="MODULE:FUNCTION", help=pipeline)
        cmd.add_argument("--size", type=_count(1), default=size[0], help=f"{size[1]} (default: %(default)s)")
        cmd.add_argument(
            "--warmup", type=_count(0), default=warmup[0], help=f"{warmup[1]} (default: %(default)s)"
        )
        if name != "tune":
            cmd.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    cmds["bench"].add_argument(
        "--profile", action="store_true", help="also print the time spent in each stage and name the slowest"
    )
    cmds["profile"].add_argument(
        "--trace", metavar="OUT.json", default=None, help="write a Chrome trace-event JSON file"
    )
    cmds["tune"].add_argument(
        "--trace",
        metavar="OUT.json",
        default=None,
        help="write a Chrome trace of the best configuration's profile run",
    )
    cmds["tune"].add_argument(
        "--ram-budget",
        metavar="SIZE",
        type=_size,
        default=None,
        help="the memory the pipeline may hold (this process's RSS plus its workers' USS), "
        "e.g. 4GiB or 512MB: configurations that do not fit are skipped and every process map "
        "runs within it (default: no budget)",
    )
    return parser


def _load(command: str, spec: str) -> DataFlow[Any] | None:
    """The flow ``spec`` names; ``None`` once a malformed or missing spec is reported (the
    command then exits with status 2). Errors of the user's own code propagate."""
    from dataflow.tools._demo import _PipelineSpecError, load_pipeline

    try:
        return load_pipeline(spec)
    except _PipelineSpecError as e:
        print(f"python -m dataflow {command}: error: {e}", file=sys.stderr)
        return None


def _profile(args: argparse.Namespace, df: DataFlow[Any]) -> str | None:
    from dataflow.tools._profiling import profile

    print(
        f"profile: {args.pipeline} -> {type(df).__name__}; {args.size} datapoints after {args.warmup} warmup",
        flush=True,
    )
    result = profile(df, size=args.size, warmup=args.warmup, progress=args.progress, trace=args.trace)
    print(result, flush=True)
    return "trace"


def _tune(args: argparse.Namespace, df: DataFlow[Any]) -> str | None:
    from dataflow.tools._demo import load_pipeline
    from dataflow.tools._tuning import tune

    print(f"tune: {args.pipeline}; {args.size} datapoints per configuration", flush=True)
    result = tune(
        lambda: load_pipeline(args.pipeline), size=args.size, warmup=args.warmup, trace=args.trace,
        ram_budget=args.ram_budget,
    )
    print(result, flush=True)
    return "trace of the best configuration" if result.stages else None


def _bench(args: argparse.Namespace, df: DataFlow[Any]) -> str | None:
    from dataflow.tools._profiling import profile
    from dataflow.tools._speed import TestDataSpeed

    print(
        f"bench: {args.pipeline} -> {type(df).__name__}; timing {args.size} datapoints "
        f"after {args.warmup} warmup",
        flush=True,
    )
    print(TestDataSpeed(df, size=args.size, warmup=args.warmup, progress=args.progress).start(), flush=True)
    if args.profile:
        table = profile(df, size=args.size, warmup=args.warmup, progress=args.progress, reset=False)
        print(f"\nper-stage profile (source first):\n{table}", flush=True)
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI with ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    df = _load(args.command, args.pipeline)
    if df is None:
        return 2
    with closing(df):  # tune builds its own flows: this one is never reset
        trace = {"tune": _tune, "profile": _profile, "bench": _bench}[args.command](args, df)
    if trace is not None and args.trace:
        print(f"{trace} written to {args.trace} (open it in https://ui.perfetto.dev or chrome://tracing)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
