"""Tiny datasets in the real on-disk formats tensorpack's loaders read, for the examples and
the tests: MNIST idx files, CIFAR python pickles, an ImageNet directory with Caffe's label lists,
a Caffe LMDB of ``Datum`` protobufs, an SVMlight file and SVHN ``.mat`` files.

Each writer takes a directory and returns what it wrote; data are random (seeded)."""

from __future__ import annotations

import gzip
import os
import pickle
import struct
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "datum",
    "write_caffe_lmdb",
    "write_cifar",
    "write_ilsvrc",
    "write_mnist",
    "write_svhn",
    "write_svmlight",
]


def _idx(path: Path, arr: np.ndarray, magic: int, gz: bool) -> None:
    header = struct.pack(">I", magic) + b"".join(struct.pack(">I", d) for d in arr.shape)
    data = header + arr.astype(np.uint8).tobytes()
    path.write_bytes(gzip.compress(data) if gz else data)


def write_mnist(
    root: Path, n_train: int = 20, n_test: int = 10, gz: bool = True, seed: int = 0
) -> dict[str, Any]:
    """``root/{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]`` as on yann.lecun.com."""
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    out = {}
    for split, prefix, n in (("train", "train", n_train), ("test", "t10k", n_test)):
        images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        labels = rng.integers(0, 10, n, dtype=np.uint8)
        ext = ".gz" if gz else ""
        _idx(root / f"{prefix}-images-idx3-ubyte{ext}", images, 2051, gz)
        _idx(root / f"{prefix}-labels-idx1-ubyte{ext}", labels, 2049, gz)
        out[split] = (images, labels)
    return out


class _Py2Pickler(pickle._Pickler):  # type: ignore[misc,name-defined]
    """Writes protocol 2 the way Python 2 did for the CIFAR files: ``str`` and ``bytes`` as
    byte strings (BINSTRING), numpy's functions under ``numpy.core``."""

    dispatch = dict(pickle._Pickler.dispatch)  # type: ignore[attr-defined]

    def save_py2_string(self, obj: str | bytes) -> None:
        raw = obj.encode("latin1") if isinstance(obj, str) else bytes(obj)
        if len(raw) < 256:
            self.write(pickle.SHORT_BINSTRING + bytes([len(raw)]) + raw)
        else:
            self.write(pickle.BINSTRING + struct.pack("<i", len(raw)) + raw)
        self.memoize(obj)

    dispatch[str] = save_py2_string
    dispatch[bytes] = save_py2_string

    def save_global(self, obj: Any, name: str | None = None) -> None:
        module = getattr(obj, "__module__", "")
        if module.startswith("numpy._core"):
            name = name or obj.__qualname__
            self.write(pickle.GLOBAL + f"{module.replace('numpy._core', 'numpy.core')}\n{name}\n".encode())
            self.memoize(obj)
            return
        super().save_global(obj, name)

    dispatch[type(len)] = save_global  # builtin functions such as numpy's _reconstruct


def _py2_dump(obj: Any, path: Path) -> None:
    with open(path, "wb") as f:
        _Py2Pickler(f, protocol=2).dump(obj)


def write_cifar(root: Path, classnum: int = 10, per_batch: int = 8, seed: int = 0) -> dict[str, Any]:
    """``root/cifar-10-batches-py/{data_batch_1..5,test_batch,batches.meta}`` (or
    ``cifar-100-python/{train,test,meta}``): pickled dicts of a ``uint8`` N x 3072 array
    (R, G, B planes of 32x32) and a label list, pickled the way Python 2 wrote them."""
    rng = np.random.default_rng(seed)
    if classnum == 10:
        base = root / "cifar-10-batches-py"
        files = {f"data_batch_{i}": "train" for i in range(1, 6)} | {"test_batch": "test"}
        key, meta = "labels", ("batches.meta", {"label_names": [f"class{i}" for i in range(10)]})
    else:
        base = root / "cifar-100-python"
        files = {"train": "train", "test": "test"}
        key, meta = "fine_labels", ("meta", {"fine_label_names": [f"fine{i}" for i in range(100)]})
    base.mkdir(parents=True, exist_ok=True)
    out: dict[str, list[Any]] = {"train": [], "test": []}
    for name, split in files.items():
        data = rng.integers(0, 256, (per_batch, 3072), dtype=np.uint8)
        labels = rng.integers(0, classnum, per_batch).tolist()
        batch = {
            "batch_label": name,
            "data": data,
            key: labels,
            "filenames": [f"{i}.png" for i in range(per_batch)],
        }
        _py2_dump(batch, base / name)
        out[split] += [[d.reshape(3, 32, 32).transpose(1, 2, 0), lab] for d, lab in zip(data, labels)]
    _py2_dump(meta[1], base / meta[0])
    return out


def _jpeg_or_raw(path: Path, img: np.ndarray) -> None:
    try:
        import cv2
    except ImportError:  # no encoder: raw bytes (ILSVRC12Files only lists names)
        path.write_bytes(img.tobytes())
        return
    cv2.imwrite(str(path), img)


def write_ilsvrc(
    root: Path, classes: int = 3, per_class: int = 4, val: int = 6, size: int = 40, seed: int = 0
) -> dict[str, Any]:
    """``root/imagenet/{train/nXXXXXXXX/*.JPEG, val/*.JPEG}`` and ``root/meta/{synsets.txt,
    synset_words.txt, train.txt, val.txt}`` (the layout of Caffe's ``caffe_ilsvrc12.tar.gz``).
    Images are JPEG when OpenCV is installed."""
    rng = np.random.default_rng(seed)
    data, meta = root / "imagenet", root / "meta"
    meta.mkdir(parents=True, exist_ok=True)
    synsets = [f"n{1440764 + i:08d}" for i in range(classes)]
    (meta / "synsets.txt").write_text("".join(s + "\n" for s in synsets))
    (meta / "synset_words.txt").write_text("".join(f"{s} class {i}\n" for i, s in enumerate(synsets)))
    train = []
    for c, s in enumerate(synsets):
        (data / "train" / s).mkdir(parents=True, exist_ok=True)
        for k in range(per_class):
            name = f"{s}/{s}_{k}.JPEG"
            _jpeg_or_raw(data / "train" / name, rng.integers(0, 256, (size, size + 8, 3), dtype=np.uint8))
            train.append((name, c))
    (data / "val").mkdir(parents=True, exist_ok=True)
    vals = []
    for k in range(val):
        name = f"ILSVRC2012_val_{k + 1:08d}.JPEG"
        _jpeg_or_raw(data / "val" / name, rng.integers(0, 256, (size + 4, size, 3), dtype=np.uint8))
        vals.append((name, k % classes))
    for split, items in (("train", train), ("val", vals)):
        (meta / f"{split}.txt").write_text("".join(f"{n} {c}\n" for n, c in items))
    return {"dir": str(data), "meta_dir": str(meta), "train": train, "val": vals}


def _varint(v: int) -> bytes:
    v &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def datum(img_chw: np.ndarray, label: int) -> bytes:
    """A serialized ``caffe.Datum`` (fields 1-5) holding ``uint8`` CHW pixels and a label."""
    c, h, w = img_chw.shape
    raw = img_chw.astype(np.uint8).tobytes()
    fields = [(1, c), (2, h), (3, w)]
    msg = b"".join(_varint(n << 3) + _varint(v) for n, v in fields)
    msg += _varint(4 << 3 | 2) + _varint(len(raw)) + raw
    return msg + _varint(5 << 3) + _varint(label)


def write_caffe_lmdb(
    path: Path, n: int = 6, shape: tuple[int, int, int] = (3, 8, 10), seed: int = 0
) -> list[Any]:
    """An LMDB as Caffe's ``convert_imageset`` writes it: keys ``%08d_<name>``, values ``Datum``."""
    import lmdb

    rng = np.random.default_rng(seed)
    items = [[rng.integers(0, 256, shape, dtype=np.uint8), int(rng.integers(0, 1000))] for _ in range(n)]
    env = lmdb.open(str(path), map_size=1 << 24, subdir=True)
    with env.begin(write=True) as txn:
        for i, (img, label) in enumerate(items):
            txn.put(f"{i:08d}_img{i}.jpg".encode(), datum(img, label))
    env.close()
    return [[img.transpose(1, 2, 0), label] for img, label in items]


def write_svmlight(
    path: Path, n: int = 12, features: int = 5, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """An SVMlight file (one-based indices, sparse rows, a comment line); returns dense X, y."""
    rng = np.random.default_rng(seed)
    x = np.where(rng.random((n, features)) < 0.5, np.round(rng.normal(size=(n, features)), 3), 0.0)
    x[0, features - 1] = 1.5  # the last feature appears, so the width is known
    y = rng.integers(0, 3, n).astype(np.float64)
    lines = ["# written by synthetic.write_svmlight"]
    for row, label in zip(x, y):
        pairs = " ".join(f"{j + 1}:{v}" for j, v in enumerate(row) if v != 0)
        lines.append(f"{int(label)} {pairs}".rstrip())
    Path(path).write_text("\n".join(lines) + "\n")
    return x, y


def write_svhn(root: Path, name: str = "train", n: int = 10, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``root/<name>_32x32.mat`` with ``X`` of shape 32x32x3xN and ``y`` of shape Nx1 in 1-10
    (10 meaning the digit 0), as on ufldl.stanford.edu. Needs SciPy."""
    import scipy.io

    rng = np.random.default_rng(seed)
    x = rng.integers(0, 256, (32, 32, 3, n), dtype=np.uint8)
    y = rng.integers(1, 11, (n, 1)).astype(np.uint8)
    os.makedirs(root, exist_ok=True)
    scipy.io.savemat(os.path.join(root, f"{name}_32x32.mat"), {"X": x, "y": y})
    return x.transpose(3, 0, 1, 2), np.where(y.ravel() == 10, 0, y.ravel())
