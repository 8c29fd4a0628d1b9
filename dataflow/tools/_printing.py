"""Look inside a flow while it runs: :class:`PrintData` and :func:`describe_datapoint`.

Example output of ``PrintData(df, num=1, name="train")``::

    PrintData (train), epoch 0, datapoint 0/1: list with 3 components
      0: ndarray:float32 of shape (64, 32, 32, 3) in range [-1, 1]
      1: ndarray:int64 of shape (64,) in range [0, 9]
      2: list of len 64
        0: str of len 9: 'image.jpg'
        1: str of len 9: 'image.png'
        2: str of len 9: 'other.jpg'
        ...
"""

from __future__ import annotations

import logging
import sys
import warnings
from collections.abc import Iterator, Mapping
from typing import Any, TextIO

import numpy as np

from .._checks import check_int
from ..base import DataFlow, ProxyDataFlow

__all__ = ["PrintData", "describe_datapoint"]

logger = logging.getLogger("dataflow")

_REPR_CHARS = 40


def _short_repr(value: object) -> str:
    text = repr(value)
    return text if len(text) <= _REPR_CHARS else text[: _REPR_CHARS - 3] + "..."


def _fmt_number(x: Any) -> str:
    if isinstance(x, (float, np.floating)):
        return f"{float(x):.4g}"
    return str(x)


def _describe_array(el: Any) -> str:
    text = f"{type(el).__name__}:{el.dtype} of shape {tuple(el.shape)}"
    if isinstance(el, np.ndarray) and el.size and el.dtype.kind in "biuf":
        lo, hi = el.min(), el.max()
        nan = el.dtype.kind == "f" and bool(np.isnan(lo))
        if nan:
            with warnings.catch_warnings():  # an all-NaN array keeps nan, silently
                warnings.simplefilter("ignore", RuntimeWarning)
                lo, hi = np.nanmin(el), np.nanmax(el)
        text += f" in range [{_fmt_number(lo)}, {_fmt_number(hi)}]" + (", with NaN" if nan else "")
    return text


def _describe_leaf(el: Any) -> str:
    if isinstance(el, (bool, int, float, complex, np.generic)) and not isinstance(el, (str, bytes)):
        name = type(el).__name__
        return f"{name} with value {_fmt_number(el)}"
    if hasattr(el, "shape") and hasattr(el, "dtype"):  # numpy arrays and framework tensors
        return _describe_array(el)
    if isinstance(el, (str, bytes, bytearray)):
        return f"{type(el).__name__} of len {len(el)}: {_short_repr(el)}"
    if el is None:
        return "None"
    return f"{type(el).__name__}: {_short_repr(el)}"


def _describe(el: Any, label: object, depth: int, max_depth: int, max_list: int, out: list[str]) -> None:
    indent = "  " * depth
    if isinstance(el, (list, tuple)):
        out.append(f"{indent}{label}: {type(el).__name__} of len {len(el)}")
        items: Any = enumerate(el)
    elif isinstance(el, Mapping):
        out.append(f"{indent}{label}: {type(el).__name__} with {len(el)} keys")
        items = el.items()
    else:
        out.append(f"{indent}{label}: {_describe_leaf(el)}")
        return
    if not len(el):
        return
    if depth >= max_depth:
        out.append(f"{indent}  ...")
        return
    for n, (key, sub) in enumerate(items):
        if n >= max_list:
            out.append(f"{indent}  ...")
            break
        _describe(sub, key, depth + 1, max_depth, max_list, out)


def describe_datapoint(dp: Any, max_depth: int = 3, max_list: int = 3) -> str:
    """A multi-line structural summary of a datapoint.

    The first line says the datapoint's type and number of components; then one line per
    component (keyed by index, or by key for a dict): arrays show ``type:dtype``, shape and
    ``[min, max]``; scalars their value; str/bytes their length and start; lists, tuples and
    dicts their length and, nested up to ``max_depth`` levels, their first ``max_list``
    elements. A datapoint that is not a list/tuple/dict is described as a single value.
    """
    max_depth = check_int("describe_datapoint", "max_depth", max_depth, 1)
    max_list = check_int("describe_datapoint", "max_list", max_list, 0)
    if isinstance(dp, (list, tuple, Mapping)):
        out = [f"{type(dp).__name__} with {len(dp)} components"]
        items = dp.items() if isinstance(dp, Mapping) else enumerate(dp)
        for key, comp in items:
            _describe(comp, key, 1, max_depth, max_list, out)
    else:
        out = [f"not a list/tuple/dict: {_describe_leaf(dp)}"]
    return "\n".join(out)


class PrintData(ProxyDataFlow):
    """Yield the upstream's datapoints unchanged, describing the first ``num`` of each epoch.

    Each description (see :func:`describe_datapoint`) names this flow (``name``), the
    epoch and the datapoint's position. Where it goes: to ``file`` when one is given;
    otherwise to the ``logging`` logger ``"dataflow"`` at INFO when that logger has a handler
    and INFO enabled, else to ``sys.stderr`` (so it is visible without any logging set-up).

    Args:
        ds: the upstream flow.
        num: datapoints to describe per epoch (0: none).
        name: a label, to tell several ``PrintData`` apart.
        max_depth: how deep nested lists/dicts are expanded (>= 1).
        max_list: how many elements of a list/dict are shown (>= 0).
        file: a text stream to write to instead of logging/stderr.

    Reentrant when the upstream is; ``len`` is the upstream's.
    """

    stateless = True  # its position is its upstream's; the epoch count only labels output

    def __init__(
        self,
        ds: DataFlow[Any],
        num: int = 1,
        name: str | None = None,
        max_depth: int = 3,
        max_list: int = 3,
        *,
        file: TextIO | None = None,
    ) -> None:
        super().__init__(ds)
        stage = type(self).__name__
        self.num = check_int(stage, "num", num, 0)
        self.name = name
        self.max_depth = check_int(stage, "max_depth", max_depth, 1)
        self.max_list = check_int(stage, "max_list", max_list, 0)
        self.file = file
        self._epoch = 0

    def _emit(self, text: str) -> None:
        if self.file is not None:
            print(text, file=self.file, flush=True)
        elif logger.isEnabledFor(logging.INFO) and logger.hasHandlers():
            logger.info(text)
        else:
            print(text, file=sys.stderr, flush=True)

    def __iter__(self) -> Iterator[Any]:
        epoch, self._epoch = self._epoch, self._epoch + 1
        return self._print(epoch, iter(self.ds))  # the epoch begins at iter()

    def _print(self, epoch: int, it: Iterator[Any]) -> Iterator[Any]:
        if self.num:
            label = f"PrintData ({self.name})" if self.name is not None else "PrintData"
            for k, dp in enumerate(it):
                desc = describe_datapoint(dp, self.max_depth, self.max_list)
                self._emit(f"{label}, epoch {epoch}, datapoint {k}/{self.num}: {desc}")
                yield dp
                if k + 1 >= self.num:
                    break
        yield from it
