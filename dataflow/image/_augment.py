"""Augmenting the images of a flow: :class:`AugmentImageComponent`,
:class:`AugmentImageComponents` and :class:`AugmentImageCoordinates` (tensorpack's names and
arguments, plus a keyword-only ``seed=``).

Each runs its augmentors in the iterating thread, one datapoint at a time, so the augmentors'
RNG states after a datapoint are a function of the datapoints before it. ``state_dict()`` saves
those states (as plain data) with the upstream's position, and ``load_state_dict`` restores
them: a resumed pipeline produces bit-identically what the uninterrupted one would have.

``reset_state()`` reseeds every augmentor (from ``seed=``, else :func:`dataflow.set_seed`, else
fresh entropy; apart in every worker of a parallel runner). Datapoints are never modified in
place: the flows build a new list/tuple/dict, and with ``copy=True`` (the default) copy each
image before augmenting it (augmentors may write into their input).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .. import _seeding as seeding
from .._state import checking_only
from .._state_fields import field
from ..base import DataFlow
from ..imgaug._random import check_tree, load_tree, save_tree, seeding_from, walk
from ..imgaug.base import AugmentorList, ImageAugmentor, check_dtype
from ..ops._components import get_component
from ..ops._map import MapData, MapDataComponent

__all__ = ["AugmentImageComponent", "AugmentImageComponents", "AugmentImageCoordinates"]

logger = logging.getLogger("dataflow")


def _as_list(stage: str, augmentors: Any) -> AugmentorList:
    if isinstance(augmentors, AugmentorList):
        return augmentors
    if isinstance(augmentors, ImageAugmentor) or (
        callable(augmentors) and not isinstance(augmentors, (list, tuple))
    ):
        return AugmentorList([augmentors])
    if not isinstance(augmentors, (list, tuple)):
        raise TypeError(f"{stage}: augmentors must be a list of augmentors, got {type(augmentors).__name__}")
    return AugmentorList(list(augmentors))


def _check_coords(stage: str, index: Any, coords: Any) -> None:
    if not isinstance(coords, np.ndarray) or coords.ndim != 2 or coords.shape[1] != 2:
        shape = getattr(coords, "shape", type(coords).__name__)
        raise ValueError(
            f"{stage}: component {index!r} must be an N x 2 array of (x, y) coordinates, got {shape}"
        )
    if coords.dtype.kind not in "fiu":
        raise TypeError(f"{stage}: component {index!r} must hold numbers, got dtype {coords.dtype}")


class _Augmenting:
    """What the three flows share: the augmentor list, seeding, RNG state, error policy."""

    augs: AugmentorList
    ds: DataFlow[Any]
    _copy: bool
    _catch: bool
    _aug_seed: int | None
    _nr_error: int

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """The flows of this module get the mixin's state hooks in their own class, where
        ``dataflow._state`` looks for them (a user's subclass inherits them from there, and
        loses them if it overrides ``__iter__``, like any stage's)."""
        if cls.__module__ == __name__:  # before DataFlow's hook reads the class body
            cls.stateless = False  # type: ignore[attr-defined]
            cls._get_state = _Augmenting._aug_get_state  # type: ignore[attr-defined]
            cls._set_state = _Augmenting._aug_set_state  # type: ignore[attr-defined]
        super().__init_subclass__(**kwargs)

    def _init_augs(self, augmentors: Any, copy: bool, catch_exceptions: bool, seed: int | None) -> None:
        stage = type(self).__name__
        self.augs = _as_list(stage, augmentors)
        self._copy = bool(copy)
        self._catch = bool(catch_exceptions)
        self._aug_seed = seeding.check_seed(stage, seed)
        self._nr_error = 0

    def reset_state(self) -> None:
        self.ds.reset_state()
        seq = seeding.seed_sequence(self._aug_seed) if self._aug_seed is not None else None
        with seeding_from(seq):
            self.augs.reset_state()
            for aug in walk(self.augs):  # parts a custom reset_state() left unseeded
                if aug.__dict__.get("_rng") is None:
                    ImageAugmentor.reset_state(aug)

    def _failed(self, e: Exception) -> None:
        """Count an augmentation error; re-raise unless ``catch_exceptions``."""
        self._nr_error += 1
        if not self._catch or isinstance(e, ImportError):  # a missing library is no data error
            raise e
        n = self._nr_error
        if n < 10 or n % 100 == 0:
            logger.warning("%s: %d augmentation errors so far; dropped a datapoint", type(self).__name__, n,
                           exc_info=e)  # fmt: skip

    def _copied(self, img: Any) -> Any:
        return img.copy() if self._copy and isinstance(img, np.ndarray) else img

    def _augment(self, dp: Any, images: Sequence[Any], coords_index: Sequence[Any]) -> Any:
        """``dp`` with the images at ``images`` augmented (the first draws the parameters)
        and the coordinates at ``coords_index`` moved with them (``None``: dropped, see
        ``catch_exceptions``)."""
        stage = type(self).__name__
        try:
            main = get_component(stage, dp, images[0])
            check_dtype(main, stage)
            others = [get_component(stage, dp, i) for i in images[1:]]
            coords = [get_component(stage, dp, i) for i in coords_index]
            for img in others:
                check_dtype(img, stage)
            for i, c in zip(coords_index, coords):
                _check_coords(stage, i, c)
            main, tfms = self.augs.augment_with_transform(self._copied(main))
            new = {images[0]: main}
            for i, img in zip(images[1:], others):
                new[i] = tfms.apply_image(self._copied(img))
            for i, c in zip(coords_index, coords):
                new[i] = tfms.apply_coords(c)
            return _replaced(dp, new)
        except Exception as e:
            self._failed(e)
            return None

    # -- checkpointing: the upstream's position (nested) plus every augmentor's RNG ---------------
    def _aug_get_state(self, live: bool) -> dict[str, Any]:
        return {"augs": save_tree(type(self).__name__, self.augs)}

    def _aug_set_state(self, state: Mapping[str, Any], live: bool) -> None:
        stage = type(self).__name__
        augs = field(stage, state, "augs", list)
        if checking_only():  # at load time: the augmentors' RNGs are the stage's own
            check_tree(stage, self.augs, augs)
        else:
            load_tree(stage, self.augs, augs)

    def _repr_args(self) -> dict[str, Any]:
        from .._repr import default_repr_args

        names = ", ".join(type(a).__name__ for a in self.augs.augmentors)
        return {"augmentors": f"[{names}]", **default_repr_args(self)}


class AugmentImageComponent(_Augmenting, MapDataComponent):
    """Augment component ``index`` (an int, or a key of dict datapoints) of every datapoint
    with ``augmentors`` (a list or :class:`~dataflow.imgaug.AugmentorList`; Albumentations
    transforms and ``img -> img`` callables are accepted too).

    ``copy``: copy the image first (augmentors may modify their input; turn it off when the
    upstream makes a fresh image per datapoint). ``catch_exceptions``: an augmentation error
    drops the datapoint and is logged (the first 9, then every 100th) instead of raised; ``len``
    is then an upper bound. ``seed``: seeds the augmentors (see the module)."""

    def __init__(
        self,
        ds: DataFlow[Any],
        augmentors: Any,
        index: int | str = 0,
        copy: bool = True,
        catch_exceptions: bool = False,
        *,
        seed: int | None = None,
    ) -> None:
        self._init_augs(augmentors, copy, catch_exceptions, seed)
        super().__init__(ds, self._aug_mapper, index)

    def _aug_mapper(self, x: Any) -> Any:
        try:
            check_dtype(x, type(self).__name__)
            return self.augs.augment(self._copied(x))
        except Exception as e:
            self._failed(e)
            return None


class AugmentImageCoordinates(_Augmenting, MapData):
    """Augment the image at ``img_index`` and move the ``N x 2`` ``(x, y)`` coordinates at
    ``coords_index`` with it (one random draw for both). Coordinates come back as floats.
    ``copy``, ``catch_exceptions``, ``seed``: as :class:`AugmentImageComponent`."""

    def __init__(
        self,
        ds: DataFlow[Any],
        augmentors: Any,
        img_index: int | str = 0,
        coords_index: int | str = 1,
        copy: bool = True,
        catch_exceptions: bool = False,
        *,
        seed: int | None = None,
    ) -> None:
        self._init_augs(augmentors, copy, catch_exceptions, seed)
        self._img_index, self._coords_index = img_index, coords_index
        super().__init__(ds, self._aug_mapper)

    def _aug_mapper(self, dp: Any) -> Any:
        return self._augment(dp, (self._img_index,), (self._coords_index,))


class AugmentImageComponents(_Augmenting, MapData):
    """Augment the images at ``index`` (the first one draws the random parameters; the others,
    e.g. masks of the same size, get the same change) and move the coordinates at each of
    ``coords_index`` with them. ``copy``, ``catch_exceptions``, ``seed``: as
    :class:`AugmentImageComponent`."""

    def __init__(
        self,
        ds: DataFlow[Any],
        augmentors: Any,
        index: Sequence[int | str] = (0, 1),
        coords_index: Sequence[int | str] = (),
        copy: bool = True,
        catch_exceptions: bool = False,
        *,
        seed: int | None = None,
    ) -> None:
        if isinstance(index, (int, str)) or not isinstance(index, Sequence) or len(index) == 0:
            raise ValueError(
                f"AugmentImageComponents: index must be a non-empty tuple of components, got {index!r}"
            )
        if isinstance(coords_index, (int, str)) or not isinstance(coords_index, Sequence):
            raise ValueError(
                f"AugmentImageComponents: coords_index must be a tuple of components, got {coords_index!r}"
            )
        self._init_augs(augmentors, copy, catch_exceptions, seed)
        self._images, self._coords_index = tuple(index), tuple(coords_index)
        super().__init__(ds, self._aug_mapper)

    def _aug_mapper(self, dp: Any) -> Any:
        return self._augment(dp, self._images, self._coords_index)


def _replaced(dp: Any, new: dict[Any, Any]) -> Any:
    """A copy of ``dp`` (same container type) with the components in ``new`` replaced."""
    out: Any = dict(dp) if isinstance(dp, dict) else list(dp)
    for k, v in new.items():
        out[k] = v
    return tuple(out) if isinstance(dp, tuple) else out
