"""ImageNet (ILSVRC12) in tensorpack's directory layouts: :class:`ILSVRC12Files` (file names),
:class:`ILSVRC12` (decoded BGR images, needs OpenCV) and :class:`ILSVRCMeta` (the label lists
from Caffe's ``caffe_ilsvrc12.tar.gz``: ``synsets.txt``, ``synset_words.txt``,
``train.txt``, ``val.txt``, ``test.txt``)."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from ..adapters._require import require
from ..sources._memory import DataFromArrays
from ._paths import FormatError, check_choice, dataset_dir, require_file

__all__ = ["ILSVRC12", "ILSVRC12Files", "ILSVRCMeta"]

_META_SOURCE = "http://dl.caffe.berkeleyvision.org/caffe_ilsvrc12.tar.gz, extracted"


class ILSVRCMeta:
    """The metadata of ILSVRC12, read from ``dir`` (else ``$TENSORPACK_DATASET/ilsvrc_metadata``,
    else ``~/tensorpack_data/ilsvrc_metadata``)."""

    def __init__(self, dir: Any = None) -> None:
        self.dir = dataset_dir("ilsvrc_metadata", dir)
        require_file("ILSVRCMeta", os.path.join(self.dir, "synsets.txt"), _META_SOURCE)

    def _lines(self, name: str) -> list[str]:
        path = require_file("ILSVRCMeta", os.path.join(self.dir, name), _META_SOURCE)
        with open(path) as f:
            return [line.strip() for line in f]

    def get_synset_words_1000(self) -> dict[int, str]:
        """``{class number: class description}``."""
        return dict(enumerate(self._lines("synset_words.txt")))

    def get_synset_1000(self) -> dict[int, str]:
        """``{class number: synset id}`` (e.g. ``n01440764``)."""
        return dict(enumerate(self._lines("synsets.txt")))

    def get_image_list(self, name: str, dir_structure: str = "original") -> list[tuple[str, int]]:
        """``[(image file name relative to the split's directory, label)]`` of split ``name``.
        With ``dir_structure="train"`` the val/test names get their synset folder prepended."""
        check_choice("ILSVRCMeta", "name", name, ("train", "val", "test"))
        check_choice("ILSVRCMeta", "dir_structure", dir_structure, ("original", "train"))
        synset = self.get_synset_1000() if name != "train" and dir_structure != "original" else None
        out = []
        for i, line in enumerate(self._lines(name + ".txt")):
            if not line:
                continue
            parts = line.split()
            if len(parts) != 2 or not parts[1].lstrip("-").isdigit():
                raise FormatError(
                    f"ILSVRCMeta: {self.dir}/{name}.txt line {i + 1}: expected 'file label', got {line!r}"
                )
            fname, cls = parts[0], int(parts[1])
            out.append((os.path.join(synset[cls], fname) if synset else fname, cls))
        if not out:
            raise FormatError(f"ILSVRCMeta: {self.dir}/{name}.txt lists no image")
        return out

    @staticmethod
    def guess_dir_structure(dir: str) -> str:
        """``"train"`` if ``dir`` holds synset folders (``n...``), else ``"original"``."""
        subdirs = sorted(os.listdir(dir))
        first = subdirs[0] if subdirs else ""
        return "train" if first.startswith("n") and os.path.isdir(os.path.join(dir, first)) else "original"


class ILSVRC12Files(DataFromArrays):
    """``[file name, label]`` for split ``name`` (``"train"``, ``"val"`` or ``"test"``) of the
    ImageNet directory ``dir``, in tensorpack's layouts (``dir/train/nXXXX/*.JPEG``;
    ``dir/val/*.JPEG`` or ``dir/val/nXXXX/*.JPEG``, guessed unless ``dir_structure`` is given).
    ``shuffle`` defaults to ``True`` for ``"train"``. The first files are checked to exist.
    Random access: shuffles with ``self.rng``, checkpoints and shards by index."""

    def __init__(
        self,
        dir: Any,
        name: str,
        meta_dir: Any = None,
        shuffle: bool | None = None,
        dir_structure: str | None = None,
        seed: int | None = None,
    ) -> None:
        stage = type(self).__name__
        self.name = check_choice(stage, "name", name, ("train", "val", "test"))
        dir = os.path.expanduser(os.fspath(dir))
        self.full_dir = os.path.join(dir, name)
        if not os.path.isdir(self.full_dir):
            raise FileNotFoundError(f"{stage}: no directory {self.full_dir!r} (expected {dir}/{name}/)")
        if name == "train":
            dir_structure = "train"
        if dir_structure is None:
            dir_structure = ILSVRCMeta.guess_dir_structure(self.full_dir)
        self.imglist = ILSVRCMeta(meta_dir).get_image_list(name, dir_structure)
        for fname, _ in self.imglist[:10]:
            if not os.path.isfile(os.path.join(self.full_dir, fname)):
                raise FileNotFoundError(
                    f"{stage}: {os.path.join(self.full_dir, fname)!r}, listed in {name}.txt, does not "
                    f"exist (directory structure {dir_structure!r})"
                )
        files = [os.path.join(self.full_dir, f) for f, _ in self.imglist]
        labels = np.array([c for _, c in self.imglist], dtype=np.int64)
        super().__init__([files, labels], shuffle=name == "train" if shuffle is None else shuffle, seed=seed)


def _imread(fname: str) -> np.ndarray:
    cv2 = require("cv2", "image", "ILSVRC12 (decoding images with OpenCV)")
    im = cv2.imread(fname, 1)  # cv2.IMREAD_COLOR: BGR
    if im is None:
        raise FormatError(f"ILSVRC12: cannot decode the image {fname!r}")
    return im  # type: ignore[no-any-return]


class ILSVRC12(ILSVRC12Files):
    """Like :class:`ILSVRC12Files`, but yields ``[BGR uint8 image, label]`` decoded with OpenCV
    (``pip install "dataflow-ml[image]"``). An undecodable file raises :class:`FormatError`
    naming it (tensorpack asserted)."""

    def _open(self, order: Sequence[int], start: int) -> tuple[Iterator[Any], Iterator[int], Iterator[Any]]:
        items, cur, probe = super()._open(order, start)
        return ([_imread(f), label] for f, label in items), cur, probe
