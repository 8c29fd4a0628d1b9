"""Every name of ``tensorpack.dataflow`` is importable from ``dataflow`` and from the module
paths tensorpack users wrote, with tensorpack's parameters and defaults; the old aliases warn
once and behave as the new classes.

tensorpack's names are read from its installed source with ``ast`` (it does not import under
numpy 2 in every setup); a frozen copy of tensorpack 0.11's lists is used where it is not
installed, and is checked against the source where it is."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import warnings
from pathlib import Path
from typing import Any

import pytest

import dataflow

#: tensorpack 0.11: module -> __all__ (tensorpack/dataflow/<module>.py and dataset/; a module
#: without ``__all__``, dataset/places.py, exports its public classes).
TENSORPACK_ALL: dict[str, list[str]] = {
    "base": ["DataFlow", "ProxyDataFlow", "RNGDataFlow", "DataFlowTerminated"],
    "common": [
        "TestDataSpeed", "PrintData", "BatchData", "BatchDataByShape", "FixedSizeData", "MapData",
        "MapDataComponent", "RepeatedData", "RepeatedDataPoint", "RandomChooseData",
        "RandomMixData", "JoinData", "ConcatData", "SelectComponent", "LocallyShuffleData", "CacheData",
    ],
    "format": ["HDF5Data", "LMDBData", "LMDBDataDecoder", "CaffeLMDB", "SVMLightData"],
    "image": ["ImageFromFile", "AugmentImageComponent", "AugmentImageCoordinates", "AugmentImageComponents"],
    "parallel": [
        "PrefetchData", "MultiProcessPrefetchData", "MultiProcessRunner", "MultiProcessRunnerZMQ",
        "MultiThreadRunner", "PrefetchDataZMQ", "MultiThreadPrefetchData",
    ],
    "parallel_map": [
        "MultiThreadMapData", "MultiProcessMapData", "MultiProcessMapDataZMQ",
        "MultiProcessMapAndBatchData", "MultiProcessMapAndBatchDataZMQ",
    ],
    "raw": ["FakeData", "DataFromQueue", "DataFromList", "DataFromGenerator", "DataFromIterable"],
    "remote": ["send_dataflow_zmq", "RemoteDataZMQ"],
    "serialize": ["LMDBSerializer", "NumpySerializer", "TFRecordSerializer", "HDF5Serializer"],
    "dataset/bsds500": ["BSDS500"],
    "dataset/caltech101": ["Caltech101Silhouettes"],
    "dataset/cifar": ["CifarBase", "Cifar10", "Cifar100"],
    "dataset/ilsvrc": ["ILSVRCMeta", "ILSVRC12", "ILSVRC12Files", "TinyImageNet"],
    "dataset/mnist": ["Mnist", "FashionMnist"],
    "dataset/places": ["Places365Standard"],
    "dataset/svhn": ["SVHNDigit"],
}  # fmt: skip

#: Modules whose names are checked elsewhere (none: the image layer is checked here too).
IMAGE_LAYER: set[str] = set()
#: Names not provided, with the reason (each listed in docs/migration.rst).
NOT_PROVIDED: dict[str, str] = {}

OLD_ALIASES = {
    "PrefetchData": "MultiProcessRunner",
    "MultiProcessPrefetchData": "MultiProcessRunner",
    "PrefetchDataZMQ": "MultiProcessRunnerZMQ",
    "MultiThreadPrefetchData": "MultiThreadRunner",
    "MultiProcessMapAndBatchData": "MultiProcessMapAndBatchDataZMQ",
}


def _tensorpack_dir() -> Path | None:
    spec = importlib.util.find_spec("tensorpack")  # finds without importing
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "dataflow"


def _parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def _source_all(tree: ast.Module) -> list[str]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            if isinstance(node.value, ast.List) and node.value.elts:
                return [ast.literal_eval(e) for e in node.value.elts]
    # no __all__: tensorpack's dataset/__init__ exports the module's names; its public ones are
    # the classes and functions it defines (the rest are its imports: os, np, cv2, logger)
    return [n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef)) and n.name[0] != "_"]


def _paths(module: str) -> tuple[str, str]:
    """(our module path, the package users import the name from) for a tensorpack module."""
    if module.startswith("dataset/"):
        return "dataflow.dataset", "dataflow.dataset"
    return f"dataflow.{module}", "dataflow"


def test_frozen_lists_match_the_installed_tensorpack() -> None:
    tp = _tensorpack_dir()
    if tp is None:
        pytest.skip("tensorpack is not installed: the frozen lists are used")
    for module, names in TENSORPACK_ALL.items():
        assert sorted(_source_all(_parse(tp / f"{module}.py"))) == sorted(names), module


def test_frozen_lists_cover_every_module_of_the_installed_tensorpack() -> None:
    tp = _tensorpack_dir()
    if tp is None:
        pytest.skip("tensorpack is not installed: the frozen lists are used")
    modules = {p.stem for p in tp.glob("*.py")} | {f"dataset/{p.stem}" for p in (tp / "dataset").glob("*.py")}
    modules = {m for m in modules if not m.split("/")[-1].startswith("_") and not m.endswith("_test")}
    assert modules == set(TENSORPACK_ALL)


_CASES = [(m, n) for m, names in TENSORPACK_ALL.items() if m not in IMAGE_LAYER for n in names]


@pytest.mark.parametrize(("module", "name"), _CASES)
def test_name_is_importable_where_tensorpack_users_import_it(module: str, name: str) -> None:
    if name in NOT_PROVIDED:
        assert not hasattr(importlib.import_module(_paths(module)[1]), name)
        return
    ours, package = _paths(module)
    obj = getattr(importlib.import_module(package), name)
    assert getattr(importlib.import_module(ours), name) is obj
    assert name in importlib.import_module(package).__all__


def test_parallel_package_has_tensorpack_parallel_names() -> None:
    import dataflow.parallel as p

    for name in TENSORPACK_ALL["parallel"]:
        assert getattr(p, name) is getattr(dataflow, name)


def _tensorpack_params(module: str, name: str, method: str = "__init__") -> list[tuple[str, Any]] | None:
    """tensorpack's (parameter, default) list of class ``name``'s ``method`` (or function)."""
    tp = _tensorpack_dir()
    assert tp is not None
    for node in ast.walk(_parse(tp / f"{module}.py")):
        fn: Any = None
        if isinstance(node, ast.ClassDef) and node.name == name:
            fn = next((b for b in node.body if isinstance(b, ast.FunctionDef) and b.name == method), None)
        elif isinstance(node, ast.FunctionDef) and node.name == name:
            fn = node
        if fn is not None:
            args = fn.args.args + fn.args.kwonlyargs
            defaults = [inspect.Parameter.empty] * (len(fn.args.args) - len(fn.args.defaults))
            defaults += [ast.literal_eval(d) for d in fn.args.defaults]
            defaults += [
                inspect.Parameter.empty if d is None else ast.literal_eval(d) for d in fn.args.kw_defaults
            ]
            return [(a.arg, d) for a, d in zip(args, defaults, strict=True) if a.arg != "self"]
    return None


#: Deliberate signature differences (documented in docs/migration.rst).
SIGNATURE_EXCEPTIONS = {
    # tensorpack defaulted these to None and then asserted they were given: here they are required.
    ("MultiThreadMapData", "num_thread"), ("MultiThreadMapData", "map_func"),
    ("MultiProcessMapData", "num_proc"), ("MultiProcessMapData", "map_func"),
    ("MultiProcessMapDataZMQ", "num_proc"), ("MultiProcessMapDataZMQ", "map_func"),
}  # fmt: skip


@pytest.mark.parametrize(("module", "name"), [(m, n) for m, n in _CASES if n not in NOT_PROVIDED])
def test_signature_keeps_tensorpack_parameters_and_defaults(module: str, name: str) -> None:
    if _tensorpack_dir() is None:
        pytest.skip("tensorpack is not installed: nothing to compare the signatures with")
    theirs = _tensorpack_params(module, name)
    if theirs is None:  # an alias assignment (PrefetchData = MultiProcessRunner)
        return
    obj = getattr(importlib.import_module(_paths(module)[1]), name)
    ours = inspect.signature(obj).parameters
    positional = [p for p in ours.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    for i, (param, default) in enumerate(theirs):
        if (name, param) in SIGNATURE_EXCEPTIONS:
            continue
        assert param in ours, f"{name} lacks tensorpack's parameter {param!r}"
        if i < len(positional) and ours[param].kind != inspect.Parameter.KEYWORD_ONLY:
            assert positional[i].name == param, f"{name}: parameter {i} is {positional[i].name}, not {param}"
        if default is not inspect.Parameter.empty:
            assert ours[param].default == default, f"{name}({param}=...) default differs"


def _tensorpack_methods(module: str, name: str) -> list[str]:
    """The public methods class ``name`` of tensorpack's ``module`` defines in its body."""
    tp = _tensorpack_dir()
    assert tp is not None
    for node in ast.walk(_parse(tp / f"{module}.py")):
        if isinstance(node, ast.ClassDef) and node.name == name:
            return [b.name for b in node.body if isinstance(b, ast.FunctionDef) and b.name[0] != "_"]
    return []


#: Methods tensorpack users call on the image layer whose signatures differ from its base class.
IMGAUG_METHODS = [
    ("imgaug/paste", "CenterPaste", "get_transform"),
    ("imgaug/paste", "RandomPaste", "get_transform"),
]
_METHOD_CASES = [
    (m, n, meth)
    for m, names in TENSORPACK_ALL.items()
    if m.startswith("dataset/") and _tensorpack_dir() is not None
    for n in names
    for meth in _tensorpack_methods(m, n)
] + IMGAUG_METHODS


@pytest.mark.parametrize(("module", "name", "method"), _METHOD_CASES)
def test_method_accepts_tensorpacks_calls(module: str, name: str, method: str) -> None:
    """Every public method of tensorpack's dataset classes (and the paste augmentors'
    ``get_transform``) exists here and accepts the calls tensorpack's signature allows: the
    same parameters in the same positions with the same defaults, none more required (a
    parameter tensorpack names ``_`` ignores its value: any name is accepted here)."""
    if _tensorpack_dir() is None:
        pytest.skip("tensorpack is not installed: nothing to compare the signatures with")
    theirs = _tensorpack_params(module, name, method)
    assert theirs is not None
    package = "dataflow.imgaug" if module.startswith("imgaug/") else _paths(module)[1]
    cls = getattr(importlib.import_module(package), name)
    assert hasattr(cls, method), f"{name} lacks tensorpack's method {method}"
    static = isinstance(inspect.getattr_static(cls, method), staticmethod)
    ours = list(inspect.signature(getattr(cls, method)).parameters.values())
    ours = ours if static else ours[1:]  # unbound: drop self
    positional = [p for p in ours if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    assert len(positional) >= len(theirs), f"{name}.{method} takes fewer arguments than tensorpack's"
    for (param, default), mine in zip(theirs, positional):
        if param != "_":
            assert mine.name == param, f"{name}.{method}: parameter {mine.name}, tensorpack's {param}"
        if default is not inspect.Parameter.empty:
            assert mine.default == default, f"{name}.{method}({param}=...) default differs"
    required = [p for p in positional if p.default is inspect.Parameter.empty]
    assert len(required) <= sum(d is inspect.Parameter.empty for _, d in theirs), f"{name}.{method}"


@pytest.mark.parametrize("old", sorted(OLD_ALIASES))
def test_old_alias_warns_once_and_is_the_new_class(old: str, recwarn: pytest.WarningsRecorder) -> None:
    from dataflow import _deprecation

    _deprecation._warned.discard(f"alias.{old}")
    cls, new = getattr(dataflow, old), getattr(dataflow, OLD_ALIASES[old])
    assert issubclass(cls, new)
    assert inspect.signature(cls) == inspect.signature(new)
    src = dataflow.DataFromList([[i] for i in range(4)], shuffle=False)
    args: dict[str, tuple[Any, ...]] = {
        "MultiThreadRunner": (lambda: dataflow.DataFromList([[1]] * 4, shuffle=False), 2, 1),
        "MultiProcessRunner": (src, 2, 1),
        "MultiProcessRunnerZMQ": (src, 1),
        "MultiProcessMapAndBatchDataZMQ": (src, 1, lambda dp: dp, 2),
    }
    warnings.simplefilter("always")
    flows = [cls(*args[OLD_ALIASES[old]]) for _ in range(2)]  # two constructions, one warning
    try:
        hits = [
            w for w in recwarn.list if issubclass(w.category, DeprecationWarning) and old in str(w.message)
        ]
        assert len(hits) == 1, [str(w.message) for w in hits]
        assert OLD_ALIASES[old] in str(hits[0].message)
        assert hits[0].filename == __file__  # points at the user's line
        flows[0].reset_state()
        out = list(flows[0])
        assert len(out) == (2 if OLD_ALIASES[old] == "MultiProcessMapAndBatchDataZMQ" else 4)
    finally:
        for f in flows:
            f.close()
