"""``python -m benchmarks``: run benchmark scenarios.

    python -m benchmarks all [--quick] [--only ttfb,mp_small] [--update-docs] [--dry-run] [--raw DIR]
    python -m benchmarks docs FILE [--doc PATH]
    python -m benchmarks list

``all`` runs every scenario (each its own script, in a subprocess), then prints one table of
ratios against the peers installed (tensorpack 0.11, torch's DataLoader, grain, tf.data,
Ray Data); ``--quick`` uses short runs (a few minutes in all on 2 cores), and
``--update-docs`` writes that table into ``docs/performance.md`` between the markers
``<!-- benchmarks:all:start -->`` and ``<!-- benchmarks:all:end -->`` (``docs FILE`` does the
same from the saved output of an earlier ``all``). ``--dry-run`` prints the commands it would
run. Each script also runs alone: ``python benchmarks/<script>.py``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._all import ROOT, SCENARIOS, header, run_all  # noqa: E402
from benchmarks._report import render, replace_section  # noqa: E402

DOC = os.path.join(ROOT, "docs", "performance.md")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("all", help="run every scenario, print one table of ratios")
    run.add_argument("--quick", action="store_true", help="short runs (a few minutes in all)")
    run.add_argument("--only", default=None, help="comma-separated scenario names (see: list)")
    run.add_argument("--update-docs", nargs="?", const=DOC, default=None, metavar="PATH",
                     help=f"write the table into PATH's marked section (default {os.path.relpath(DOC)})")
    run.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    run.add_argument("--raw", metavar="DIR", help="also write each script's own output to DIR/<scenario>.md")
    docs = sub.add_parser("docs", help="write the saved output of `all` into the docs' marked section")
    docs.add_argument("file", help="what `python -m benchmarks all` printed (its stdout)")
    docs.add_argument("--doc", default=DOC, help=f"the document (default {os.path.relpath(DOC)})")
    sub.add_parser("list", help="the scenarios and their scripts")
    args = parser.parse_args(argv)
    if args.command == "docs":
        with open(args.file, encoding="utf-8") as f:
            text = f.read()
        if "| scenario | dataflow contender |" not in text:
            parser.error(f"{args.file} does not hold the table printed by `python -m benchmarks all`")
        _write(args.doc, text)
        return 0
    if args.command == "list":
        for s in SCENARIOS:
            print(f"{s.name:22} benchmarks/{s.script} {' '.join(s.full)}  (--quick: {' '.join(s.quick)})")
        return 0
    names = [n.strip() for n in args.only.split(",") if n.strip()] if args.only else None
    unknown = sorted(set(names or []) - {s.name for s in SCENARIOS})
    if unknown:
        parser.error(f"unknown scenario(s) {unknown}; known: {[s.name for s in SCENARIOS]}")
    if args.dry_run:
        for s in SCENARIOS:
            if names is None or s.name in names:
                print(f"{s.name}: python benchmarks/{s.script} {' '.join(s.quick if args.quick else s.full)}")
        return 0
    t0 = time.perf_counter()
    outcomes = run_all(names, args.quick, lambda m: print(m, file=sys.stderr, flush=True), args.raw)
    rows = [r for o in outcomes for r in o.rows]
    notes = [n for o in outcomes for n in o.notes]
    text = header(args.quick, names, time.perf_counter() - t0) + "\n\n" + render(rows, notes)
    print(text)
    if args.update_docs:
        _write(args.update_docs, text)
    failed = [o.scenario.name for o in outcomes if not o.rows]
    return 1 if failed and len(failed) == len(outcomes) else 0


def _write(path: str, text: str) -> None:
    """Put ``text`` between the markers of ``path``."""
    with open(path, encoding="utf-8") as f:
        doc = f.read()
    with open(path, "w", encoding="utf-8") as f:
        f.write(replace_section(doc, text))
    print(f"(written into {path})", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
