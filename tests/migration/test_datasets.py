"""The dataset loaders and tensorpack's readers of other tools' files read tiny files written in
the real formats; where tensorpack imports, its own readers agree on the same files."""

from __future__ import annotations

import os
import pickle
import struct
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dataflow
from dataflow import FormatError
from dataflow.dataset import (
    Cifar10,
    Cifar100,
    FashionMnist,
    ILSVRC12Files,
    ILSVRCMeta,
    Mnist,
    Places365Standard,
    SVHNDigit,
    TinyImageNet,
)
from tests.checkpoint._harness import check_resume

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "tensorpack_migration"))
import synthetic  # noqa: E402


def _tensorpack(module: str) -> Any:
    try:
        return __import__(f"tensorpack.dataflow.dataset.{module}", fromlist=["_"])
    except Exception:  # not installed, or does not import on this numpy
        return None


# -- MNIST ----------------------------------------------------------------------------------


@pytest.mark.parametrize("gz", [True, False])
def test_mnist_reads_idx_files_gzipped_or_not(tmp_path: Path, gz: bool) -> None:
    written = synthetic.write_mnist(tmp_path, gz=gz)
    df = Mnist("test", shuffle=False, dir=tmp_path)
    df.reset_state()
    images, labels = written["test"]
    out = list(df)
    assert len(df) == len(out) == len(images)
    for (img, label), ref, ref_label in zip(out, images, labels):
        assert img.shape == (28, 28) and img.dtype == np.float32
        np.testing.assert_allclose(img, ref / 255.0, rtol=1e-6)
        assert label == ref_label


def test_mnist_agrees_with_tensorpacks_reader(tmp_path: Path) -> None:
    tp = _tensorpack("mnist")
    if tp is None:
        pytest.skip("tensorpack's MNIST reader does not import here")
    synthetic.write_mnist(tmp_path)
    ref = tp.extract_images(str(tmp_path / "train-images-idx3-ubyte.gz"))
    ours = Mnist("train", shuffle=False, dir=tmp_path).images
    np.testing.assert_array_equal(ours, ref.reshape(ours.shape))
    np.testing.assert_array_equal(
        Mnist("train", dir=tmp_path).labels, tp.extract_labels(str(tmp_path / "train-labels-idx1-ubyte.gz"))
    )


def test_dataset_dir_comes_from_tensorpack_dataset_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synthetic.write_mnist(tmp_path / "fashion_mnist_data")
    monkeypatch.setenv("TENSORPACK_DATASET", str(tmp_path))
    assert len(FashionMnist("train")) == 20
    monkeypatch.delenv("TENSORPACK_DATASET")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    synthetic.write_mnist(tmp_path / "home" / "tensorpack_data" / "mnist_data", n_test=3)
    assert len(Mnist("test")) == 3


def test_missing_and_malformed_files_raise_naming_the_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="t10k-images-idx3-ubyte.gz.*nothing is downloaded"):
        Mnist("test", dir=tmp_path)
    synthetic.write_mnist(tmp_path)
    (tmp_path / "t10k-labels-idx1-ubyte.gz").write_bytes(b"\x00\x00\x08\x03junk")
    with pytest.raises(FormatError, match="t10k-labels.*cannot read"):
        Mnist("test", dir=tmp_path)
    (tmp_path / "t10k-labels-idx1-ubyte.gz").unlink()
    (tmp_path / "t10k-labels-idx1-ubyte").write_bytes(b"\x00\x00\x08\x03junk")
    with pytest.raises(FormatError, match="t10k-labels.*magic number"):
        Mnist("test", dir=tmp_path)
    with pytest.raises(ValueError, match="train_or_test must be one of"):
        Mnist("valid", dir=tmp_path)


def test_mnist_shuffles_reproducibly_and_resumes(tmp_path: Path) -> None:
    synthetic.write_mnist(tmp_path, n_train=7)
    assert check_resume(lambda: Mnist("train", shuffle=True, dir=tmp_path), epochs=2) > 10


# -- CIFAR ----------------------------------------------------------------------------------


@pytest.mark.parametrize("classnum", [10, 100])
def test_cifar_reads_the_python_batches(tmp_path: Path, classnum: int) -> None:
    written = synthetic.write_cifar(tmp_path, classnum)
    cls = Cifar10 if classnum == 10 else Cifar100
    train = cls("train", dir=tmp_path)
    assert train._shuffle and not cls("test", dir=tmp_path)._shuffle  # tensorpack's defaults
    test = cls("test", dir=tmp_path)
    test.reset_state()
    out = list(test)
    assert len(out) == len(written["test"])
    for (img, label), (ref, ref_label) in zip(out, written["test"]):
        assert img.shape == (32, 32, 3) and img.dtype == np.uint8
        np.testing.assert_array_equal(img, ref)
        assert label == ref_label
    assert len(train) == len(written["train"])
    assert train.get_label_names()[:2] == (["class0", "class1"] if classnum == 10 else ["fine0", "fine1"])
    mean = train.get_per_channel_mean()
    all_imgs = np.stack([x[0] for x in written["train"] + written["test"]]).astype(np.float32)
    np.testing.assert_allclose(mean, all_imgs.mean(axis=(0, 1, 2)), rtol=1e-5)


def test_cifar_agrees_with_tensorpacks_decoding(tmp_path: Path) -> None:
    """tensorpack's read_cifar: pickle.load(encoding="bytes"), dic[b"data"][k].reshape(3, 32, 32)
    transposed to HWC (its reader itself insists on 10000 images per file)."""
    synthetic.write_cifar(tmp_path, 10)
    ours = Cifar10("train", shuffle=False, dir=tmp_path)
    ours.reset_state()
    ref = []
    for i in range(1, 6):
        with open(tmp_path / "cifar-10-batches-py" / f"data_batch_{i}", "rb") as f:
            dic = pickle.load(f, encoding="bytes")  # the trusted way, on our own test file
        ref += [
            [d.reshape(3, 32, 32).transpose(1, 2, 0), lab] for d, lab in zip(dic[b"data"], dic[b"labels"])
        ]
    got = list(ours)
    assert len(got) == len(ref)
    for (a, la), (b, lb) in zip(got, ref):
        np.testing.assert_array_equal(a, b)
        assert la == lb


def test_cifar_bytes_keys_from_python3_pickles_are_read(tmp_path: Path) -> None:
    synthetic.write_cifar(tmp_path, 10)
    path = tmp_path / "cifar-10-batches-py" / "test_batch"
    batch = pickle.loads(path.read_bytes(), encoding="bytes")
    assert set(batch) >= {b"data", b"labels"}
    path.write_bytes(pickle.dumps(batch, protocol=4))  # bytes keys, numpy._core globals
    assert len(Cifar10("test", dir=tmp_path)) == 8


class _Evil:
    def __reduce__(self) -> Any:
        return (print, ("code ran",))


def test_cifar_pickle_with_code_is_refused_without_running_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    synthetic.write_cifar(tmp_path, 10)
    path = tmp_path / "cifar-10-batches-py" / "test_batch"
    path.write_bytes(pickle.dumps({"data": np.zeros((1, 3072), np.uint8), "labels": [_Evil()]}, protocol=2))
    with pytest.raises(FormatError, match=r"builtin.*print.*refusing to run code"):
        Cifar10("test", dir=tmp_path)
    assert "code ran" not in capsys.readouterr().out
    path.write_bytes(b"\x80\x02}q\x00")  # truncated
    with pytest.raises(FormatError, match="not a readable pickle"):
        Cifar10("test", dir=tmp_path)


def test_cifar_resumes_and_shards_by_index(tmp_path: Path) -> None:
    synthetic.write_cifar(tmp_path, 10, per_batch=2)
    assert check_resume(lambda: Cifar10("train", dir=tmp_path), epochs=2) > 10
    shards = [Cifar10("train", dir=tmp_path, shuffle=False).shard(2, i) for i in range(2)]
    for s in shards:
        s.reset_state()
    labels = [[int(dp[1]) for dp in s] for s in shards]
    assert sorted(labels[0] + labels[1]) == sorted(int(x) for x in Cifar10("train", dir=tmp_path).labels)


# -- ImageNet -------------------------------------------------------------------------------


def test_ilsvrc12files_reads_train_and_val_layouts(tmp_path: Path) -> None:
    w = synthetic.write_ilsvrc(tmp_path)
    train = ILSVRC12Files(w["dir"], "train", meta_dir=w["meta_dir"], shuffle=False)
    train.reset_state()
    got = [(str(f), int(c)) for f, c in train]
    assert got == [(str(Path(w["dir"]) / "train" / n), c) for n, c in w["train"]]
    val = ILSVRC12Files(w["dir"], "val", meta_dir=w["meta_dir"])
    assert not val._shuffle and len(val) == len(w["val"])
    meta = ILSVRCMeta(w["meta_dir"])
    assert (
        meta.get_synset_1000()[0] == "n01440764" and meta.guess_dir_structure(w["dir"] + "/val") == "original"
    )


def test_ilsvrc12files_val_in_train_structure(tmp_path: Path) -> None:
    w = synthetic.write_ilsvrc(tmp_path)
    val = Path(w["dir"]) / "val"
    synsets = (Path(w["meta_dir"]) / "synsets.txt").read_text().split()
    for name, c in w["val"]:
        (val / synsets[c]).mkdir(exist_ok=True)
        (val / name).rename(val / synsets[c] / name)
    df = ILSVRC12Files(w["dir"], "val", meta_dir=w["meta_dir"], shuffle=False)
    df.reset_state()
    assert [Path(f).parent.name for f, _ in df] == [synsets[c] for _, c in w["val"]]


def test_ilsvrc_errors_name_what_is_missing(tmp_path: Path) -> None:
    w = synthetic.write_ilsvrc(tmp_path)
    with pytest.raises(FileNotFoundError, match="synsets.txt.*caffe_ilsvrc12"):
        ILSVRC12Files(w["dir"], "train", meta_dir=tmp_path / "nowhere")
    (Path(w["dir"]) / "train" / w["train"][0][0]).unlink()
    with pytest.raises(FileNotFoundError, match="listed in train.txt"):
        ILSVRC12Files(w["dir"], "train", meta_dir=w["meta_dir"])


def test_ilsvrc12_decodes_bgr_images(tmp_path: Path) -> None:
    pytest.importorskip("cv2")
    w = synthetic.write_ilsvrc(tmp_path)
    df = dataflow.dataset.ILSVRC12(w["dir"], "val", meta_dir=w["meta_dir"])
    df.reset_state()
    imgs = [img for img, _ in df]
    assert len(imgs) == len(w["val"]) and all(i.dtype == np.uint8 and i.shape == (44, 40, 3) for i in imgs)


def test_ilsvrc12_training_bbox_reads_the_first_box_of_each_annotation(tmp_path: Path) -> None:
    w = synthetic.write_ilsvrc(tmp_path)
    imglist = ILSVRCMeta(w["meta_dir"]).get_image_list("train")
    boxes = tmp_path / "bbox"
    xml = (
        "<annotation><folder>{s}</folder><filename>{f}</filename><size><width>48</width>"
        "<height>40</height><depth>3</depth></size>{objects}</annotation>"
    )
    obj = (
        "<object><name>x</name><pose>Unspecified</pose><bndbox><xmin>{}</xmin><ymin>{}</ymin>"
        "<xmax>{}</xmax><ymax>{}</ymax></bndbox></object>"
    )
    first, second = imglist[0][0], imglist[1][0]  # e.g. n01440764/n01440764_0.JPEG
    for name, objects in ((first, obj.format(3, 4, 30, 39) + obj.format(0, 0, 1, 1)), (second, "")):
        (boxes / name).parent.mkdir(parents=True, exist_ok=True)
        (boxes / name).with_suffix(".xml").write_text(xml.format(s="x", f=name, objects=objects))
    got = dataflow.dataset.ILSVRC12.get_training_bbox(str(boxes), imglist)
    assert len(got) == len(imglist) and got[1] is None and all(b is None for b in got[2:])
    assert got[0] is not None and got[0].dtype == np.float32
    np.testing.assert_array_equal(got[0], [3, 4, 30, 39])
    (boxes / second).with_suffix(".xml").write_text("<annotation><object>")
    with pytest.raises(FormatError, match=r"get_training_bbox: .*_1\.xml is not an ImageNet box annotation"):
        dataflow.dataset.ILSVRC12.get_training_bbox(boxes, imglist)


def _varint(v: int) -> bytes:
    out = bytearray()
    while True:
        out.append((v & 0x7F) | (0x80 if v > 0x7F else 0))
        v >>= 7
        if not v:
            return bytes(out)


def _blob_proto(chw: np.ndarray, shape_field: bool = False) -> bytes:
    """A serialized ``caffe.BlobProto`` written from caffe.proto by hand: by default as Caffe
    wrote ``imagenet_mean.binaryproto`` (num/channels/height/width, packed float ``data``);
    with ``shape_field``, a ``BlobShape`` (field 7, packed dims) and unpacked floats."""
    floats = chw.astype("<f4").ravel()
    if shape_field:
        dims = b"".join(_varint(d) for d in (1, *chw.shape))
        shape = _varint(1 << 3 | 2) + _varint(len(dims)) + dims
        msg = _varint(7 << 3 | 2) + _varint(len(shape)) + shape
        return msg + b"".join(_varint(5 << 3 | 5) + struct.pack("<f", x) for x in floats)
    header = b"".join(_varint(n << 3) + _varint(v) for n, v in zip((1, 2, 3, 4), (1, *chw.shape)))
    return header + _varint(5 << 3 | 2) + _varint(4 * floats.size) + floats.tobytes()


@pytest.mark.parametrize("shape_field", [False, True])
def test_ilsvrcmeta_per_pixel_mean_reads_the_binaryproto(tmp_path: Path, shape_field: bool) -> None:
    w = synthetic.write_ilsvrc(tmp_path)
    chw = np.random.default_rng(0).uniform(0, 255, (3, 12, 10)).astype(np.float32)
    (Path(w["meta_dir"]) / "imagenet_mean.binaryproto").write_bytes(_blob_proto(chw, shape_field))
    meta = ILSVRCMeta(w["meta_dir"])
    mean = meta.get_per_pixel_mean()
    assert mean.dtype == np.float32 and mean.shape == (12, 10, 3)
    np.testing.assert_array_equal(mean, chw.transpose(1, 2, 0))
    cv2 = pytest.importorskip("cv2")
    resized = meta.get_per_pixel_mean((6, 8))  # (h, w), as tensorpack
    assert resized.shape == (6, 8, 3)
    np.testing.assert_array_equal(resized, cv2.resize(chw.transpose(1, 2, 0), (8, 6)))
    with pytest.raises(ValueError, match="size must be"):
        meta.get_per_pixel_mean(6)


def test_ilsvrcmeta_per_pixel_mean_missing_or_malformed_file(tmp_path: Path) -> None:
    w = synthetic.write_ilsvrc(tmp_path)
    meta = ILSVRCMeta(w["meta_dir"])
    path = Path(w["meta_dir"]) / "imagenet_mean.binaryproto"
    with pytest.raises(FileNotFoundError) as e:
        meta.get_per_pixel_mean()
    assert str(path) in str(e.value)
    assert "http://dl.caffe.berkeleyvision.org/caffe_ilsvrc12.tar.gz" in str(e.value)
    path.write_bytes(_blob_proto(np.zeros((3, 4, 4), np.float32))[:-3])  # truncated data
    with pytest.raises(FormatError, match="imagenet_mean.binaryproto is not a caffe BlobProto"):
        meta.get_per_pixel_mean()
    path.write_bytes(_blob_proto(np.zeros((1, 4, 4), np.float32)))
    with pytest.raises(FormatError, match=r"shape \(1, 1, 4, 4\), not one 3-channel image"):
        meta.get_per_pixel_mean()


# -- TinyImageNet and Places365-Standard ----------------------------------------------------


def _write_tiny_imagenet(root: Path, classes: int = 3, per_class: int = 2, val: int = 5) -> dict[str, Any]:
    """``tiny-imagenet-200.zip`` as it unpacks: ``wnids.txt``, ``words.txt``,
    ``train/<wnid>/{images/<wnid>_<k>.JPEG, <wnid>_boxes.txt}``, ``val/{images/val_<k>.JPEG,
    val_annotations.txt}`` (tab-separated: file, wnid, box) and ``test/images``; 64x64 JPEGs."""
    cv2 = pytest.importorskip("cv2")
    rng = np.random.default_rng(0)
    wnids = [f"n{1443537 + 7 * i:08d}" for i in range(classes)]
    (root / "test" / "images").mkdir(parents=True)
    cv2.imwrite(str(root / "test" / "images" / "test_0.JPEG"), rng.integers(0, 256, (64, 64, 3), np.uint8))
    (root / "wnids.txt").write_text("".join(f"{w}\n" for w in wnids[::-1]))  # not sorted, like the real one
    (root / "words.txt").write_text("".join(f"{w}\tthing {i}, other name\n" for i, w in enumerate(wnids)))
    train = []
    for w in wnids:
        (root / "train" / w / "images").mkdir(parents=True)
        names = [f"{w}_{k}.JPEG" for k in range(per_class)]
        for name in names:
            path = root / "train" / w / "images" / name
            cv2.imwrite(str(path), rng.integers(0, 256, (64, 64, 3), np.uint8))
            train.append((str(path), wnids[::-1].index(w)))
        (root / "train" / w / f"{w}_boxes.txt").write_text("".join(f"{n}\t0\t3\t60\t62\n" for n in names))
    train.sort(key=lambda item: (item[1], item[0]))  # by label (wnids.txt order), then file name
    (root / "val" / "images").mkdir(parents=True)
    vals, lines = [], []
    for k in range(val):
        w = wnids[k % classes]
        path = root / "val" / "images" / f"val_{k}.JPEG"
        cv2.imwrite(str(path), rng.integers(0, 256, (64, 64, 3), np.uint8))
        vals.append((str(path), wnids[::-1].index(w)))
        lines.append(f"val_{k}.JPEG\t{w}\t1\t2\t50\t60\n")
    (root / "val" / "val_annotations.txt").write_text("".join(lines))
    return {"train": train, "val": vals, "wnids": wnids[::-1]}


def _decoded(items: Any) -> list[tuple[np.ndarray, int]]:
    import cv2

    return [(cv2.imread(f, cv2.IMREAD_COLOR), c) for f, c in items]


def _assert_same(got: list[Any], want: list[tuple[np.ndarray, int]]) -> None:
    assert len(got) == len(want)
    for (img, label), (ref, ref_label) in zip(got, want):
        assert img.dtype == np.uint8 and img.shape == ref.shape
        np.testing.assert_array_equal(img, ref)
        assert int(label) == ref_label


def test_tiny_imagenet_reads_train_and_val(tmp_path: Path) -> None:
    w = _write_tiny_imagenet(tmp_path)
    train = TinyImageNet(str(tmp_path), "train", shuffle=False)
    train.reset_state()
    _assert_same(list(train), _decoded(w["train"]))
    assert list(train)[0][0].shape == (64, 64, 3)
    val = TinyImageNet(tmp_path, "val")
    assert not val._shuffle and TinyImageNet(tmp_path, "train")._shuffle  # tensorpack's defaults
    val.reset_state()
    _assert_same(list(val), _decoded(w["val"]))


def test_tiny_imagenet_shuffles_resumes_and_shards(tmp_path: Path) -> None:
    _write_tiny_imagenet(tmp_path)
    assert check_resume(lambda: TinyImageNet(tmp_path, "train"), epochs=2, max_cuts=6) > 5
    shards = [TinyImageNet(tmp_path, "val").shard(2, i, equal=False) for i in range(2)]
    for s in shards:
        s.reset_state()
    assert sorted(int(lab) for s in shards for _, lab in s) == [0, 1, 1, 2, 2]


def test_tiny_imagenet_errors_name_the_dataset_and_the_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"TinyImageNet: .*train.*tiny-imagenet-200\.zip"):
        TinyImageNet(tmp_path, "train")
    _write_tiny_imagenet(tmp_path)
    with pytest.raises(ValueError, match="TinyImageNet: name must be one of 'train', 'val', got 'test'"):
        TinyImageNet(tmp_path, "test")
    first = (tmp_path / "wnids.txt").read_text().split()[0]
    os.rename(tmp_path / "train" / first / "images", tmp_path / "train" / first / "imgs")
    with pytest.raises(FileNotFoundError, match=f"TinyImageNet: .*{first}.*images.*wnids.txt"):
        TinyImageNet(tmp_path, "train")
    ann = tmp_path / "val" / "val_annotations.txt"
    ann.write_text(ann.read_text() + "val_9.JPEG\tn99999999\t0\t0\t1\t1\n")
    with pytest.raises(FormatError, match="val_annotations.txt line 6: .*n99999999"):
        TinyImageNet(tmp_path, "val")
    (tmp_path / "val" / "images" / "val_0.JPEG").write_bytes(b"not a jpeg")
    ann.write_text("val_0.JPEG\t" + first + "\n")
    df = TinyImageNet(tmp_path, "val")
    df.reset_state()
    with pytest.raises(FormatError, match="TinyImageNet: cannot decode the image .*val_0.JPEG"):
        list(df)
    (tmp_path / "wnids.txt").unlink()
    with pytest.raises(FileNotFoundError, match=r"wnids\.txt.*tiny-imagenet-200\.zip"):
        TinyImageNet(tmp_path, "val")


def _write_places(root: Path, per_class: int = 2) -> dict[str, Any]:
    """``places365standard_easyformat.tar`` as it unpacks (``places365_standard/``):
    ``train.txt`` / ``val.txt`` listing ``<split>/<category>/<file>.jpg`` and the 256x256 JPEGs
    (smaller here) in those folders; category names as there (``apartment_building-outdoor``)."""
    cv2 = pytest.importorskip("cv2")
    rng = np.random.default_rng(1)
    categories = ["airfield", "apartment_building-outdoor", "bakery-shop"]
    out: dict[str, Any] = {}
    for split in ("train", "val"):
        listed, items = [], []
        for k in range(per_class * len(categories)):
            cat = categories[(2 * k + 1) % len(categories)]  # not in sorted order
            name = f"{k + 1:08d}.jpg" if split == "train" else f"Places365_val_{k + 1:08d}.jpg"
            (root / split / cat).mkdir(parents=True, exist_ok=True)
            cv2.imwrite(str(root / split / cat / name), rng.integers(0, 256, (24, 20, 3), np.uint8))
            listed.append(f"{split}/{cat}/{name}")
            items.append((str(root / split / cat / name), categories.index(cat)))
        (root / f"{split}.txt").write_text("".join(line + "\n" for line in listed))
        out[split] = items
    out["categories"] = categories
    return out


def test_places365_reads_the_easy_format(tmp_path: Path) -> None:
    w = _write_places(tmp_path)
    for split in ("train", "val"):
        df = Places365Standard(str(tmp_path), split, shuffle=False)
        df.reset_state()
        _assert_same(list(df), _decoded(w[split]))
        assert df.get_label_names() == w["categories"]
    assert Places365Standard(tmp_path, "train")._shuffle and not Places365Standard(tmp_path, "val")._shuffle
    assert check_resume(lambda: Places365Standard(tmp_path, "train"), epochs=2, max_cuts=6) > 5


def test_places365_errors_name_the_dataset_and_the_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"Places365Standard: .*nowhere.*places365standard_easy"):
        Places365Standard(tmp_path / "nowhere", "train")
    with pytest.raises(FileNotFoundError, match=r"Places365Standard: .*train\.txt.*places365standard_easy"):
        Places365Standard(tmp_path, "train")
    _write_places(tmp_path)
    with pytest.raises(ValueError, match="Places365Standard: name must be one of 'train', 'val'"):
        Places365Standard(tmp_path, "test")
    (tmp_path / "val.txt").write_text("val/airfield/x.jpg\nPlaces365_val_00000001.jpg\n")
    with pytest.raises(FormatError, match=r"val\.txt line 2: expected 'val/<category>/<file>'"):
        Places365Standard(tmp_path, "val")
    (tmp_path / "val.txt").write_text("val/airfield/missing.jpg\n")
    with pytest.raises(FileNotFoundError, match=r"missing\.jpg.*listed in val\.txt"):
        Places365Standard(tmp_path, "val")


@pytest.mark.framework  # tensorpack imports TensorFlow
def test_tiny_imagenet_and_places_agree_with_tensorpacks_loaders(tmp_path: Path) -> None:
    """tensorpack 0.11's own loaders on the same directories give the same datapoints (its
    TinyImageNet insists on the 200 classes of the real dataset)."""
    tp_ilsvrc, tp_places = _tensorpack("ilsvrc"), _tensorpack("places")
    if tp_ilsvrc is None or tp_places is None:
        pytest.skip("tensorpack's dataset loaders do not import here")
    pytest.importorskip("cv2")
    tiny = {"classes": 200, "per_class": 1}
    cases = [
        (TinyImageNet, tp_ilsvrc.TinyImageNet, tmp_path / "tiny", _write_tiny_imagenet, tiny),
        (Places365Standard, tp_places.Places365Standard, tmp_path / "places", _write_places, {}),
    ]
    for ours, theirs, root, write, kwargs in cases:
        root.mkdir()
        write(root, **kwargs)
        for split in ("train", "val"):
            mine, ref = ours(str(root), split, shuffle=False), theirs(str(root), split, shuffle=False)
            mine.reset_state()
            ref.reset_state()
            _assert_same(list(mine), [(img, int(label)) for img, label in ref])
    places = str(tmp_path / "places")
    want = tp_places.Places365Standard(places, "val").get_label_names()
    assert Places365Standard(places, "val").get_label_names() == want


# -- SVHN (SciPy) ---------------------------------------------------------------------------


def test_svhn_reads_the_mat_files(tmp_path: Path) -> None:
    pytest.importorskip("scipy")
    x, y = synthetic.write_svhn(tmp_path, "test")
    df = SVHNDigit("test", data_dir=tmp_path, shuffle=False)
    df.reset_state()
    out = list(df)
    np.testing.assert_array_equal(np.stack([o[0] for o in out]), x)
    assert [int(o[1]) for o in out] == y.tolist() and max(y) <= 9


# -- CaffeLMDB and SVMLightData -------------------------------------------------------------


def test_caffe_lmdb_decodes_datums(tmp_path: Path) -> None:
    pytest.importorskip("lmdb")
    written = synthetic.write_caffe_lmdb(tmp_path / "caffe")
    df = dataflow.CaffeLMDB(str(tmp_path / "caffe"), shuffle=False)
    df.reset_state()
    out = list(df)
    assert len(out) == len(written)
    for (img, label), (ref, ref_label) in zip(out, written):
        np.testing.assert_array_equal(img, ref)
        assert label == ref_label


def test_caffe_datum_negative_label_and_float_data() -> None:
    from dataflow.formats._caffe_lmdb import decode_datum

    img, label = decode_datum(synthetic.datum(np.arange(6, dtype=np.uint8).reshape(1, 2, 3), -3))
    assert label == -3 and img.shape == (2, 3, 1)
    floats = np.array([0.5, 1.5], np.float32)
    msg = b"\x08\x01\x10\x01\x18\x02" + b"".join(b"\x35" + f.tobytes() for f in floats)  # field 6, fixed32
    img, label = decode_datum(msg)
    np.testing.assert_array_equal(img.ravel(), floats)


def test_caffe_lmdb_bad_value_raises_naming_the_key(tmp_path: Path) -> None:
    lmdb = pytest.importorskip("lmdb")
    env = lmdb.open(str(tmp_path / "bad"), map_size=1 << 20)
    with env.begin(write=True) as txn:
        txn.put(b"00000000_x", b"\x08\x03\x10\x02\x18\x02\x22\x02ab")  # 3x2x2 announced, 2 bytes
    env.close()
    df = dataflow.CaffeLMDB(str(tmp_path / "bad"), shuffle=False)
    df.reset_state()
    with pytest.raises(FormatError, match="00000000_x.*not a caffe Datum"):
        list(df)


def test_svmlight_matches_its_dense_matrix(tmp_path: Path) -> None:
    x, y = synthetic.write_svmlight(tmp_path / "d.svm")
    df = dataflow.SVMLightData(str(tmp_path / "d.svm"), shuffle=False)
    df.reset_state()
    out = list(df)
    np.testing.assert_array_equal(np.stack([o[0] for o in out]), x)
    np.testing.assert_array_equal([o[1] for o in out], y)
    assert check_resume(lambda: dataflow.SVMLightData(str(tmp_path / "d.svm")), epochs=2, max_cuts=8)


def test_svmlight_zero_based_and_errors(tmp_path: Path) -> None:
    (tmp_path / "z.svm").write_text("1 0:2.5 2:1 qid:3\n-1 1:4 # comment\n")
    df = dataflow.SVMLightData(str(tmp_path / "z.svm"), shuffle=False)
    df.reset_state()
    assert [o[0].tolist() for o in df] == [[2.5, 0.0, 1.0], [0.0, 4.0, 0.0]]
    (tmp_path / "bad.svm").write_text("1 1:2\n1 x:y\n")
    with pytest.raises(FormatError, match="bad.svm line 2"):
        dataflow.SVMLightData(str(tmp_path / "bad.svm"))
