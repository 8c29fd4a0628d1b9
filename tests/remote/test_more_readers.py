"""Image files and LMDB databases named by URL: images are fetched one request each and
decoded in memory; LMDB (mapped into memory) refuses a URL with the way out."""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np
import pytest

import dataflow as D

fsspec = pytest.importorskip("fsspec")
cv2 = pytest.importorskip("cv2")

pytestmark = pytest.mark.timeout(60)


def _images(tmp_path: Path, n: int) -> list[Path]:
    rng = np.random.default_rng(0)
    paths = []
    for k in range(n):
        path = tmp_path / f"img-{k}.png"
        assert cv2.imwrite(str(path), rng.integers(0, 255, (8 + k, 6, 3), dtype=np.uint8))
        paths.append(path)
    return paths


def test_images_from_urls_equal_the_local_files(tmp_path: Path) -> None:
    paths = _images(tmp_path, 3)
    mem = fsspec.filesystem("memory")
    prefix = f"memory://img-{uuid.uuid4().hex}"
    for p in paths:
        mem.pipe(f"{prefix}/{p.name}", p.read_bytes())
    local = D.ImageFromFile([str(p) for p in paths])
    remote = D.ImageFromFile([f"{prefix}/img-*.png"])  # a glob, expanded once, sorted
    local.reset_state()
    remote.reset_state()
    assert [f.rsplit("/", 1)[1] for f in remote.files] == [p.name for p in paths]
    for (a,), (b,) in zip(local, remote, strict=True):
        np.testing.assert_array_equal(a, b)
    assert remote.io_stats()["requests"] >= 3


def test_an_image_that_is_not_one_names_its_url(tmp_path: Path) -> None:
    mem = fsspec.filesystem("memory")
    url = f"memory://img-{uuid.uuid4().hex}/bad.png"
    mem.pipe(url, b"not an image")
    flow = D.ImageFromFile([url])
    flow.reset_state()
    with pytest.raises(D.FormatError, match=r"ImageFromFile: .*bad\.png: OpenCV cannot decode"):
        list(flow)


def test_lmdb_refuses_a_url_and_says_what_to_do() -> None:
    pytest.importorskip("lmdb")
    with pytest.raises(ValueError, match=r"LMDBData: LMDB maps its file into memory.*copy the database"):
        D.LMDBData("s3://bucket/train.lmdb")


def test_a_local_file_named_like_a_glob_is_read_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "part[1].txt"
    path.write_text("a\nb\n")
    flow = D.TextLineData(str(path))
    flow.reset_state()
    assert list(flow) == [["a"], ["b"]]


def test_an_object_named_like_a_glob_is_read_as_it_is() -> None:
    """The glob ``part[1].txt`` matches ``part1.txt``, not itself: where it matches nothing,
    the object of that exact name is read; where nothing has that name either, the error
    names the pattern."""
    fs = fsspec.filesystem("memory")
    fs.pipe("memory://glob-named/part[1].txt", b"a\nb\n")
    try:
        flow = D.TextLineData("memory://glob-named/part[1].txt")
        flow.reset_state()
        assert list(flow) == [["a"], ["b"]]
        with pytest.raises(FileNotFoundError, match=r"TextLineData: no object matches memory://glob-named/part\[2\]"):
            D.TextLineData("memory://glob-named/part[2].txt")
    finally:
        fs.rm("memory://glob-named", recursive=True)
