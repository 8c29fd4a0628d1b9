"""ImageNet in tensorpack's directory layouts: :class:`ILSVRC12Files` (file names),
:class:`ILSVRC12` (decoded BGR images, needs OpenCV), :class:`ILSVRCMeta` (the label lists and
the mean image from Caffe's ``caffe_ilsvrc12.tar.gz``: ``synsets.txt``, ``synset_words.txt``,
``train.txt``, ``val.txt``, ``test.txt``, ``imagenet_mean.binaryproto``) and
:class:`TinyImageNet` (the 200-class, 64x64 subset, as ``tiny-imagenet-200.zip`` unpacks)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..adapters._require import require
from ..sources._memory import DataFromArrays
from ._blobproto import decode_blob_proto
from ._images import DecodedImages
from ._paths import FormatError, check_choice, dataset_dir, missing, require_file

__all__ = ["ILSVRC12", "ILSVRC12Files", "ILSVRCMeta", "TinyImageNet"]

_META_SOURCE = "http://dl.caffe.berkeleyvision.org/caffe_ilsvrc12.tar.gz, extracted"
_TINY_SOURCE = "http://cs231n.stanford.edu/tiny-imagenet-200.zip, extracted"


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

    def get_per_pixel_mean(self, size: Any = None) -> np.ndarray:
        """The per-pixel mean image, ``float32`` of shape ``(h, w, 3)`` (BGR, in ``[0, 255]``),
        read from ``imagenet_mean.binaryproto`` in the metadata directory (Caffe's 256x256 mean,
        decoded without Caffe). ``size``: ``(h, w)`` to resize it to with ``cv2.resize`` (needs
        OpenCV). A missing file raises :class:`FileNotFoundError` naming the path and where it
        comes from; a malformed one :class:`FormatError`."""
        stage = "ILSVRCMeta.get_per_pixel_mean"
        path = require_file(stage, os.path.join(self.dir, "imagenet_mean.binaryproto"), _META_SOURCE)
        with open(path, "rb") as f:
            buf = f.read()
        try:
            blob = decode_blob_proto(buf)
        except ValueError as e:
            raise FormatError(f"{stage}: {path} is not a caffe BlobProto ({e})") from e
        chw = blob[0] if blob.ndim == 4 and blob.shape[0] == 1 else blob  # (num=1, c, h, w)
        if chw.ndim != 3 or chw.shape[0] != 3:
            raise FormatError(f"{stage}: {path} holds a blob of shape {blob.shape}, not one 3-channel image")
        arr = np.ascontiguousarray(chw.transpose(1, 2, 0))
        if size is None:
            return arr
        if not (
            isinstance(size, (tuple, list))
            and len(size) == 2
            and all(isinstance(x, (int, np.integer)) and x > 0 for x in size)
        ):
            raise ValueError(f"{stage}: size must be (h, w) of positive ints, got {size!r}")
        cv2 = require("cv2", "image", stage + "(size=...)")
        return cv2.resize(arr, (int(size[1]), int(size[0])))  # type: ignore[no-any-return]

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


class ILSVRC12(ILSVRC12Files, DecodedImages):
    """Like :class:`ILSVRC12Files`, but yields ``[BGR uint8 image, label]`` decoded with OpenCV
    (``pip install "dataflow-ml[image]"``). An undecodable file raises :class:`FormatError`
    naming it (tensorpack asserted)."""

    @staticmethod
    def get_training_bbox(bbox_dir: Any, imglist: Sequence[Any]) -> list[np.ndarray | None]:
        """For each ``(file name, label)`` of ``imglist`` (:meth:`ILSVRCMeta.get_image_list`),
        the first box of its annotation ``bbox_dir/<file name>.xml`` (ImageNet's
        ``ILSVRC2012_bbox_train_v2.tar.gz`` layout) as ``float32 [xmin, ymin, xmax, ymax]``;
        ``None`` where there is no such file or it holds no box. A file that is not a valid
        annotation raises :class:`FormatError` naming it."""
        import xml.etree.ElementTree as ET

        bbox_dir = os.path.expanduser(os.fspath(bbox_dir))
        out: list[np.ndarray | None] = []
        for item in imglist:
            path = os.path.join(bbox_dir, os.path.splitext(item[0])[0] + ".xml")
            if not os.path.isfile(path):
                out.append(None)
                continue
            try:
                box = ET.parse(path).getroot().find("object/bndbox")
                keys = ("xmin", "ymin", "xmax", "ymax")
                coords = None if box is None else [float(box.findtext(k, "")) for k in keys]
                out.append(None if coords is None else np.array(coords, np.float32))
            except (ET.ParseError, ValueError) as e:
                raise FormatError(
                    f"ILSVRC12.get_training_bbox: {path} is not an ImageNet box annotation ({e})"
                ) from e
        return out


class TinyImageNet(DecodedImages):
    """``[BGR uint8 image, label]`` of split ``name`` (``"train"`` or ``"val"``) of Tiny ImageNet
    in ``dir``, as ``tiny-imagenet-200.zip`` unpacks: ``wnids.txt`` (one class id per line; the
    label is its line number), ``train/<wnid>/images/*.JPEG`` and ``val/images/*.JPEG`` listed
    with their class in ``val/val_annotations.txt``. Images are 64x64x3, decoded with OpenCV
    (``pip install "dataflow-ml[image]"``); an undecodable one raises :class:`FormatError`.
    A class's training images are taken in file-name order (tensorpack took directory order).
    ``shuffle`` defaults to ``True`` for ``"train"``. Random access: shuffles with
    ``self.rng``, checkpoints and shards by index."""

    def __init__(self, dir: Any, name: str, shuffle: bool | None = None, seed: int | None = None) -> None:
        stage = type(self).__name__
        self.name = check_choice(stage, "name", name, ("train", "val"))
        dir = os.path.expanduser(os.fspath(dir))
        self.full_dir = os.path.join(dir, name)
        if not os.path.isdir(self.full_dir):
            raise missing(stage, self.full_dir, _TINY_SOURCE)
        wnids_path = require_file(stage, os.path.join(dir, "wnids.txt"), _TINY_SOURCE)
        with open(wnids_path) as f:
            self.wnids = [line.strip() for line in f if line.strip()]
        cls_to_id = {w: i for i, w in enumerate(self.wnids)}
        if not self.wnids or len(cls_to_id) != len(self.wnids):
            raise FormatError(f"{stage}: {wnids_path} lists no class, or a class twice")
        self.imglist = self._train(stage) if name == "train" else self._val(stage, cls_to_id)
        files = [f for f, _ in self.imglist]
        labels = np.array([c for _, c in self.imglist], dtype=np.int64)
        super().__init__([files, labels], shuffle=name == "train" if shuffle is None else shuffle, seed=seed)

    def _train(self, stage: str) -> list[tuple[str, int]]:
        out = []
        for label, wnid in enumerate(self.wnids):
            images = os.path.join(self.full_dir, wnid, "images")
            if not os.path.isdir(images):
                raise FileNotFoundError(f"{stage}: no directory {images!r} for class {wnid} of wnids.txt")
            names = sorted(n for n in os.listdir(images) if os.path.isfile(os.path.join(images, n)))
            out += [(os.path.join(images, n), label) for n in names]
        if not out:
            raise FormatError(f"{stage}: {self.full_dir} holds no training image")
        return out

    def _val(self, stage: str, cls_to_id: dict[str, int]) -> list[tuple[str, int]]:
        path = require_file(stage, os.path.join(self.full_dir, "val_annotations.txt"), _TINY_SOURCE)
        out = []
        with open(path) as f:
            for i, line in enumerate(f):
                parts = line.split()
                if not parts:
                    continue
                if len(parts) < 2 or parts[1] not in cls_to_id:
                    raise FormatError(
                        f"{stage}: {path} line {i + 1}: expected 'file wnid ...' with a wnid of "
                        f"wnids.txt, got {line.strip()!r}"
                    )
                out.append((os.path.join(self.full_dir, "images", parts[0]), cls_to_id[parts[1]]))
        if not out:
            raise FormatError(f"{stage}: {path} lists no image")
        for fname, _ in out[:10]:
            if not os.path.isfile(fname):
                raise FileNotFoundError(f"{stage}: {fname!r}, listed in val_annotations.txt, does not exist")
        return out
