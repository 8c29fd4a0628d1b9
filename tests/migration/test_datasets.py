"""The dataset loaders and tensorpack's readers of other tools' files read tiny files written in
the real formats; where tensorpack imports, its own readers agree on the same files."""

from __future__ import annotations

import pickle
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dataflow
from dataflow import FormatError
from dataflow.dataset import Cifar10, Cifar100, FashionMnist, ILSVRC12Files, ILSVRCMeta, Mnist, SVHNDigit
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
