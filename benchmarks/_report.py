"""Turn the markdown tables the benchmark scripts print into one table of ratios.

Every script prints its own tables (``| contender | median ... | ... |``). This module reads
them back: for each of **our** rows (a scenario says which: by default the contenders named
``dataflow...``) it computes the ratio against each **peer** row of the same table
(tensorpack, torch's loaders, grain, tf.data, Ray Data), from the medians, always as "how
many times better is ours" (ours / peer for rates, peer / ours for times; against the peer
row doing the same job, else against the peer's best row), and copies the
ratios the script itself printed against other references (``vs memcpy``, ``vs serial map``,
``vs direct``...). :func:`render` prints the rows as one markdown table, and
:func:`replace_section` puts it between two markers of a document.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

__all__ = ["PEERS", "Row", "Table", "parse_tables", "render", "replace_section", "rows_for"]

#: peer columns, in order; ``classify`` maps a contender name to one of them
PEERS = ("tensorpack", "torch", "grain", "tf.data", "Ray Data")
START = "<!-- benchmarks:all:start -->"
END = "<!-- benchmarks:all:end -->"


@dataclass
class Table:
    section: str  # the "### ..." heading above it ("" if none)
    header: list[str]
    rows: list[list[str]]


@dataclass
class Row:
    """One of our contenders in one scenario (and section): a cell per peer, plus others."""

    scenario: str
    contender: str
    peers: dict[str, str] = field(default_factory=dict)
    others: list[str] = field(default_factory=list)


def classify(name: str) -> str | None:
    """The peer column of a contender name (``None``: not a peer library)."""
    low = name.lower()
    if low.startswith("tensorpack"):
        return "tensorpack"
    if "dataloader" in low:  # torch DataLoader, torchdata StatefulDataLoader
        return "torch"
    if low.startswith("grain"):
        return "grain"
    if "tf.data" in low:
        return "tf.data"
    if low.startswith("ray data"):
        return "Ray Data"
    return None


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def parse_tables(text: str) -> list[Table]:
    """Every markdown table in ``text``, with the heading it stands under."""
    tables: list[Table] = []
    section = ""
    block: list[str] = []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            block.append(line)
            continue
        if len(block) >= 3 and set(block[1].replace("|", "").strip()) <= set("-: "):
            tables.append(Table(section, _cells(block[0]), [_cells(b) for b in block[2:]]))
        block = []
        if line.startswith("#"):
            section = line.lstrip("#").strip()
    return tables


def _number(cell: str) -> float | None:
    m = re.search(r"-?\d[\d,]*\.?\d*", cell)
    return float(m.group().replace(",", "")) if m else None


def _metric(header: list[str]) -> tuple[int, bool] | None:
    """The column of medians and whether lower is better (a time, not a rate)."""
    for i, h in enumerate(header):
        if "median" in h.lower():
            lower = "/" not in h and re.search(r"\b(s|ms|µs|us|seconds)\b", h) is not None
            return i, lower
    return None


def _key(name: str) -> str:
    """A contender name without its library's words: ``dataflow LMDB`` and ``tensorpack
    LMDB`` both give ``lmdb``, so rows that do the same job pair up."""
    words = re.sub(r"[,:+()]", " ", name.lower()).split()
    drop = {"dataflow", "tensorpack", "0.11", "torch", "dataloader", "grain", "ray", "data", "torchdata"}
    return " ".join(w for w in words if w not in drop)


def rows_for(
    scenario: str,
    tables: Iterable[Table],
    ours: Callable[[str], bool],
    section: Callable[[str], str],
    pairs: dict[str, str] | None = None,
) -> list[Row]:
    """Our rows of ``tables`` with their ratios (see the module docstring). ``pairs`` names,
    for some of our rows (by prefix), the one peer row to compare with."""
    out: dict[tuple[str, str], Row] = {}
    for t in tables:
        metric = _metric(t.header)
        label = section(t.section)
        values = {r[0]: _number(r[metric[0]]) if metric and len(r) > metric[0] else None for r in t.rows}
        peers = [r[0] for r in t.rows if not ours(r[0]) and classify(r[0])]

        def score(row: str, metric: tuple[int, bool] | None = metric, values: dict = values) -> float:
            v = values.get(row) or 0.0
            return (-v if metric[1] else v) if metric and v else float("-inf")

        for r in t.rows:
            name = r[0]
            if not ours(name) or (label, name) in out:  # a second table of the same rows: skip
                continue
            row = out[(label, name)] = Row(f"{scenario} {label}".strip(), name)
            mine = values.get(name)
            for column in PEERS:
                chosen = _choose(name, [p for p in peers if classify(p) == column], pairs, score)
                theirs = values.get(chosen) if chosen else None
                if metric and mine and theirs:
                    ratio = theirs / mine if metric[1] else mine / theirs
                    row.peers[column] = f"{ratio:.2f}x" + (f" ({chosen})" if _key(chosen) else "")
            for h, cell in zip(t.header, r):
                ref = h[3:] if h.startswith("vs ") else None
                if ref and classify(ref) is None and ref != name and cell.endswith("x"):
                    row.others.append(f"{ref} {cell}")
    return list(out.values())


def _choose(
    name: str, candidates: list[str], pairs: dict[str, str] | None, better: Callable[[str], float]
) -> str | None:
    """The peer row to compare ``name`` with: the one ``pairs`` names, else the one doing the
    same job (same name without the library), else the peer's best row."""
    for prefix, peer in (pairs or {}).items():
        if name.startswith(prefix):
            return peer if peer in candidates else None
    same = [c for c in candidates if _key(c) == _key(name)]
    if same:
        return same[0]
    return max(candidates, key=better) if candidates else None


def render(rows: list[Row], notes: Iterable[str] = ()) -> str:
    """One markdown table: a row per (scenario, our contender), a column per peer."""
    peers = " | ".join(f"vs {p}" for p in PEERS)
    head = f"| scenario | dataflow contender | {peers} | vs other references |"
    lines = [head, "|" + "---|" * (3 + len(PEERS))]
    for r in rows:
        cells = [r.peers.get(p, "") for p in PEERS]
        lines.append(f"| {r.scenario} | {r.contender} | " + " | ".join(cells) + f" | {'; '.join(r.others)} |")
    text = "\n".join(lines)
    notes = list(notes)
    if notes:
        text += "\n\n" + "\n".join(f"- {n}" for n in notes)
    return text


def replace_section(document: str, body: str) -> str:
    """``document`` with the text between :data:`START` and :data:`END` replaced by ``body``
    (the markers are appended at the end if missing)."""
    block = f"{START}\n{body.strip()}\n{END}"
    if START in document and END in document and document.index(START) < document.index(END):
        before, rest = document.split(START, 1)
        return before + block + rest.split(END, 1)[1]
    return document.rstrip("\n") + "\n\n" + block + "\n"
