"""How Hugging Face ``datasets`` objects are checked and how their formatted batches become
rows: what :class:`~dataflow.DataFromHF` and its stream counterpart share. Imports nothing
from ``datasets`` (a ``datasets`` object exists only once ``datasets`` is imported)."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from itertools import repeat
from typing import Any

__all__ = ["FORMATS", "check_format", "hf_kind", "table_rows"]

#: The output formats that give one dict per row (``datasets``' names and aliases); ``None``
#: and ``"python"`` give Python objects.
FORMATS = ("numpy", "np", "python", "torch", "pt", "pytorch", "tensorflow", "tf", "jax")


def hf_kind(stage: str, ds: object) -> str:
    """``"map"`` for a ``datasets.Dataset``, ``"iterable"`` for a ``datasets.IterableDataset``;
    anything else raises :class:`TypeError` naming the stage and the type."""
    hf = sys.modules.get("datasets")
    if hf is not None:
        if isinstance(ds, hf.Dataset):
            return "map"
        if isinstance(ds, hf.IterableDataset):
            return "iterable"
        if isinstance(ds, (hf.DatasetDict, hf.IterableDatasetDict)):
            raise TypeError(
                f"{stage}: ds is a {type(ds).__name__} of splits {sorted(ds)}; pass one split, "
                f"e.g. ds[{sorted(ds)[0]!r}]"
            )
    what = ds.__name__ if isinstance(ds, type) else type(ds).__name__
    raise TypeError(
        f"{stage}: ds must be a datasets.Dataset or datasets.IterableDataset (Hugging Face "
        f"datasets), got {what}; for a list or arrays use DataFromList or DataFromArrays"
    )


def check_format(stage: str, fmt: object) -> str | None:
    """``fmt`` as ``datasets`` names it (``None`` for Python objects), or :class:`ValueError`."""
    if fmt is not None and (not isinstance(fmt, str) or fmt not in FORMATS):
        raise ValueError(
            f"{stage}: format must be one of {', '.join(map(repr, FORMATS))} or None (Python "
            f"objects), got {fmt!r}; table formats (arrow, pandas, polars) give no rows"
        )
    return None if fmt in (None, "python") else fmt


def _is_text(kind: Any) -> bool:
    import pyarrow as pa

    return bool(pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_binary(kind)
                or pa.types.is_large_binary(kind))


def table_rows(
    table: Any, formatter: Any, columns: list[str] | None = None, output_all: bool = False
) -> Iterator[dict[str, Any]]:
    """The rows of an Arrow table as dicts, formatted by ``datasets``' ``formatter`` (one
    call for the whole table), except string and binary columns, which are taken from Arrow
    as ``str`` and ``bytes`` (numpy's fixed-width strings would drop trailing zero bytes).
    ``columns``/``output_all``: the dataset's selected columns, as ``datasets`` has them.
    Rows are built by C-level iterators (no Python frame per row); array values are views
    of the table's formatted arrays."""
    from datasets.formatting import format_table

    wanted = table.column_names if columns is None else columns
    texts = [c for c in wanted if c in table.column_names and _is_text(table.schema.field(c).type)]
    rest = table.drop_columns(texts) if texts else table
    batch: Mapping[str, Any] = {}
    if rest.num_columns:
        keep = None if columns is None else [c for c in columns if c not in texts]
        batch = format_table(rest, range(rest.num_rows), formatter, keep, output_all)
    names = [c for c in table.column_names if c in texts or c in batch]
    values = [table.column(c).to_pylist() if c in texts else batch[c] for c in names]
    return map(dict, map(zip, repeat(names), zip(*values)))
