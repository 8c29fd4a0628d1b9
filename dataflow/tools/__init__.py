"""Tools to measure and inspect flows: :mod:`~dataflow.tools.speed` (``TestDataSpeed``),
:mod:`~dataflow.tools.profiling` (``profile``: per-stage breakdown), :mod:`~dataflow.tools.printing`
(``PrintData``) and :mod:`~dataflow.tools.demo` (the pipeline ``python -m dataflow bench`` runs).

Import from the submodules (or from :mod:`dataflow`); this package re-exports nothing.
"""
