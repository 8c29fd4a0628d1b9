"""Places365-Standard in its "easy directory structure" (``places365standard_easyformat.tar``,
the 256x256 images): :class:`Places365Standard`."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ._images import DecodedImages
from ._paths import FormatError, check_choice, missing, require_file

__all__ = ["Places365Standard"]

_SOURCE = "http://data.csail.mit.edu/places/places365/places365standard_easyformat.tar, extracted"


class Places365Standard(DecodedImages):
    """``[BGR uint8 image, label]`` of split ``name`` (``"train"`` or ``"val"``) of
    Places365-Standard in ``dir`` (the ``places365_standard`` folder): ``<name>.txt`` lists the
    images as ``<name>/<category>/<file>.jpg``, relative to ``dir``. The label is the category's
    index among the categories ``<name>.txt`` lists, sorted by name (the order of Places'
    ``categories_places365.txt``); :meth:`get_label_names` gives them. Images (256x256x3) are
    decoded with OpenCV (``pip install "dataflow-ml[image]"``); an undecodable one raises
    :class:`FormatError`. ``shuffle`` defaults to ``True`` for ``"train"``. Random access:
    shuffles with ``self.rng``, checkpoints and shards by index."""

    def __init__(self, dir: Any, name: str, shuffle: bool | None = None, seed: int | None = None) -> None:
        stage = type(self).__name__
        self.name = check_choice(stage, "name", name, ("train", "val"))
        dir = os.path.expanduser(os.fspath(dir))
        if not os.path.isdir(dir):
            raise missing(stage, dir, _SOURCE)
        label_file = require_file(stage, os.path.join(dir, name + ".txt"), _SOURCE)
        listed: list[tuple[str, str]] = []
        with open(label_file) as f:
            for i, line in enumerate(f):
                rel = line.strip()
                if not rel:
                    continue
                parts = rel.split("/")
                if len(parts) < 3 or not parts[1]:
                    raise FormatError(
                        f"{stage}: {label_file} line {i + 1}: expected '{name}/<category>/<file>', "
                        f"got {rel!r}"
                    )
                listed.append((os.path.join(dir, rel), parts[1]))
        if not listed:
            raise FormatError(f"{stage}: {label_file} lists no image")
        for fname, _ in listed[:10]:
            if not os.path.isfile(fname):
                raise FileNotFoundError(f"{stage}: {fname!r}, listed in {name}.txt, does not exist")
        self._labels = sorted({category for _, category in listed})
        ids = {category: i for i, category in enumerate(self._labels)}
        self._files = [(path, ids[category]) for path, category in listed]
        labels = np.array([c for _, c in self._files], dtype=np.int64)
        super().__init__(
            [[p for p, _ in self._files], labels],
            shuffle=name == "train" if shuffle is None else shuffle,
            seed=seed,
        )

    def get_label_names(self) -> list[str]:
        """The name of each class, indexed by label."""
        return list(self._labels)
