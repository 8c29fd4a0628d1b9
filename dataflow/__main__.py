"""The command line: ``python -m dataflow bench [--pipeline module:function] [--size N]
[--warmup N] [--profile] [--no-progress]``, ``python -m dataflow profile [--pipeline
module:function] [--size N] [--warmup N] [--trace out.json]``, ``python -m dataflow tune
--pipeline module:function [--size N] [--warmup N] [--trace out.json]``, and ``python -m
dataflow --version``.

``bench`` measures a pipeline's throughput with :class:`~dataflow.tools.speed.TestDataSpeed`
(and, with ``--profile``, its per-stage breakdown with :func:`~dataflow.tools.profiling.profile`)
and prints the results. Exit status: 0 on success, 2 on a usage error (bad arguments, a
``--pipeline`` that does not lead to a DataFlow), 1 if the pipeline itself raises.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

DEMO = "dataflow.tools.demo:demo_pipeline"


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


def _version() -> str:
    """``dataflow-ml X.Y.Z (python A.B.C, numpy N)``: what a bug report needs."""
    import platform

    import numpy

    from dataflow import __version__

    return f"dataflow-ml {__version__} (python {platform.python_version()}, numpy {numpy.__version__})"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m dataflow", description="Tools for dataflow pipelines.")
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    bench = sub.add_parser(
        "bench",
        help="measure the throughput of a pipeline",
        description="Measure how many datapoints per second a pipeline produces.",
    )
    bench.add_argument(
        "--pipeline",
        default=DEMO,
        metavar="MODULE:FUNCTION",
        help="a function returning the DataFlow to measure, e.g. mypkg.data:train_flow "
        f"(default: the built-in demo, {DEMO})",
    )
    bench.add_argument(
        "--size", type=_count(1), default=1000, help="datapoints to time (default: %(default)s)"
    )
    bench.add_argument(
        "--warmup", type=_count(0), default=10, help="datapoints to draw before timing (default: %(default)s)"
    )
    bench.add_argument(
        "--profile", action="store_true", help="also print the time spent in each stage and name the slowest"
    )
    bench.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    prof = sub.add_parser(
        "profile",
        help="time each stage of a pipeline; optionally write a Chrome trace",
        description="Time each stage of a pipeline's in-process chain, name the slowest, and with "
        "--trace write a Chrome trace (Perfetto / chrome://tracing): one track per stage and worker.",
    )
    prof.add_argument("--pipeline", default=DEMO, metavar="MODULE:FUNCTION",
                      help=f"a function returning the DataFlow to profile (default: {DEMO})")
    prof.add_argument("--size", type=_count(1), default=2000,
                      help="datapoints to time (default: %(default)s)")
    prof.add_argument("--warmup", type=_count(0), default=100,
                      help="datapoints drawn first (default: %(default)s)")
    prof.add_argument("--trace", metavar="OUT.json", default=None,
                      help="write a Chrome trace-event JSON file")
    prof.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    tune = sub.add_parser(
        "tune",
        help="search the best num_proc/buffer_size of a pipeline's process maps",
        description="Time a pipeline's process maps with num_proc/buffer_size 'auto' and a grid "
        "of fixed values; print the rates, the best configuration and its per-stage times.",
    )
    tune.add_argument("--pipeline", default=DEMO, metavar="MODULE:FUNCTION",
                      help="a function building a fresh DataFlow on every call")
    tune.add_argument("--size", type=_count(1), default=2000, help="datapoints timed per configuration")
    tune.add_argument("--warmup", type=_count(0), default=100, help="datapoints drawn first, untimed")
    tune.add_argument("--trace", metavar="OUT.json", default=None,
                      help="write a Chrome trace of the best configuration's profile run")
    return parser


def _profile(args: argparse.Namespace) -> int:
    from dataflow.tools.demo import _PipelineSpecError, load_pipeline
    from dataflow.tools.profiling import profile

    try:
        df = load_pipeline(args.pipeline)
    except _PipelineSpecError as e:
        print(f"python -m dataflow profile: error: {e}", file=sys.stderr)
        return 2
    print(f"profile: {args.pipeline} -> {type(df).__name__}; {args.size} datapoints after "
          f"{args.warmup} warmup", flush=True)
    try:
        result = profile(df, size=args.size, warmup=args.warmup, progress=args.progress, trace=args.trace)
        print(result, flush=True)
    finally:
        close = getattr(df, "close", None)
        if close is not None:
            close()
    if args.trace:
        print(f"trace written to {args.trace} (open it in https://ui.perfetto.dev or chrome://tracing)")
    return 0


def _tune(args: argparse.Namespace) -> int:
    from dataflow.tools.demo import _PipelineSpecError, load_pipeline
    from dataflow.tools.tuning import tune

    try:
        load_pipeline(args.pipeline).close()
    except _PipelineSpecError as e:
        print(f"python -m dataflow tune: error: {e}", file=sys.stderr)
        return 2
    print(f"tune: {args.pipeline}; {args.size} datapoints per configuration", flush=True)
    result = tune(lambda: load_pipeline(args.pipeline), size=args.size, warmup=args.warmup, trace=args.trace)
    print(result, flush=True)
    if args.trace and result.stages:
        print(f"trace of the best configuration written to {args.trace} (open it in "
              f"https://ui.perfetto.dev or chrome://tracing)")
    return 0


def _bench(args: argparse.Namespace) -> int:
    from dataflow.tools.demo import _PipelineSpecError, load_pipeline
    from dataflow.tools.profiling import profile
    from dataflow.tools.speed import TestDataSpeed

    try:
        df = load_pipeline(args.pipeline)
    except _PipelineSpecError as e:
        print(f"python -m dataflow bench: error: {e}", file=sys.stderr)
        return 2
    print(
        f"bench: {args.pipeline} -> {type(df).__name__}; timing {args.size} datapoints "
        f"after {args.warmup} warmup",
        flush=True,
    )
    try:
        result = TestDataSpeed(df, size=args.size, warmup=args.warmup, progress=args.progress).start()
        print(result, flush=True)
        if args.profile:
            table = profile(df, size=args.size, warmup=args.warmup, progress=args.progress, reset=False)
            print(f"\nper-stage profile (source first):\n{table}", flush=True)
    finally:
        close = getattr(df, "close", None)
        if close is not None:
            close()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI with ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    return {"tune": _tune, "profile": _profile}.get(args.command, _bench)(args)


if __name__ == "__main__":
    sys.exit(main())
