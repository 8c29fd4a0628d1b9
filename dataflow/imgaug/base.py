"""The augmentor protocol: :class:`ImageAugmentor` (alias :class:`Augmentor`),
:class:`AugmentorList` and :class:`PhotometricAugmentor`.

An augmentor holds a *random policy*; ``get_transform(img)`` draws its random parameters once
and returns a deterministic :class:`~dataflow.imgaug.transform.Transform`, whose
``apply_image`` and ``apply_coords`` then apply the *same* change to the image, to other images
of the same shape (masks) and to coordinates (an ``N x 2`` float array of ``x, y``; pixel
``(row i, column j)`` covers ``[j, j+1) x [i, i+1)``, so its centre is ``(j + 0.5, i + 0.5)``).

Images are ``(h, w)`` or ``(h, w, c)`` numpy arrays, ``uint8`` in ``[0, 255]`` or floating
point in ``[0, 1]`` or ``[0, 255]`` (other integer dtypes, e.g. label masks, pass through the
geometric augmentors); non-numeric arrays are refused with a ``TypeError``.
Transforms may modify the image they are given in place (as in tensorpack): the flows copy it
first unless built with ``copy=False``. Coordinates are never modified in place.

What an augmentor list accepts besides augmentors is wrapped here too (:func:`as_augmentor`):
an Albumentations transform in :class:`Albumentations`, any other ``img -> img`` callable in
:class:`ImageFunction` (both re-exported by :mod:`dataflow.imgaug.external`).
"""

from __future__ import annotations

import threading
from collections import namedtuple
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from .._checks import check_callable
from .._deprecation import warn_once
from ._random import fork_generation, fresh_rng
from .transform import (
    BaseTransform,
    BoundPhotometricTransform,
    LazyTransform,
    Transform,
    TransformFactory,
    TransformList,
    default_repr,
)

__all__ = ["Augmentor", "AugmentorList", "ImageAugmentor", "PhotometricAugmentor"]

ImagePlaceholder = namedtuple("ImagePlaceholder", ["shape"])


def check_dtype(img: Any, stage: str = "imgaug") -> None:
    """Refuse what is not a numeric image array (augmentors are written for ``uint8`` and
    floating point images; integer masks pass through the geometric ones)."""
    if not isinstance(img, np.ndarray):
        raise TypeError(f"{stage}: an image must be a numpy array, got {type(img).__name__}")
    if img.dtype.kind not in "biuf":
        raise TypeError(f"{stage}: got an image of dtype {img.dtype}; use uint8 or floating point images")


def check_image_ndim(img: np.ndarray, stage: str) -> None:
    if img.ndim not in (2, 3):
        raise ValueError(f"{stage}: an image must be (h, w) or (h, w, c), got shape {img.shape}")


class ImageAugmentor:
    """Base class of augmentors. Subclasses implement :meth:`get_transform`.

    ``self.rng`` is a :class:`~dataflow.CompatGenerator` (``randint``, ``rand``, ``randn``,
    ``uniform``, ``choice``... as on tensorpack's ``RandomState``). It is seeded by
    :meth:`reset_state` (which the image flows call in the process that iterates), or on first
    use, from the flow's ``seed=``, :func:`dataflow.set_seed` or fresh entropy, apart in every
    worker; after a ``fork`` it reseeds itself on its first draw in the child. Thread safety:
    numpy generators lock per draw, so sharing an augmentor between threads is safe but the
    draws interleave in thread order (use one augmentor per thread for reproducibility).
    """

    #: what dataflow.imgaug._random recognises augmentors by (it cannot import this module)
    _image_augmentor: ClassVar[bool] = True
    _rng: Any = None
    _rng_fork: int = -1

    @property
    def rng(self) -> Any:
        rng = self._rng
        if rng is None or self._rng_fork != fork_generation():
            rng = self._rng = fresh_rng()
            self._rng_fork = fork_generation()
        return rng

    @rng.setter
    def rng(self, value: Any) -> None:
        self._rng = value
        self._rng_fork = fork_generation()

    def reset_state(self) -> None:
        """Reseed ``self.rng`` (see the class). Composite augmentors also reset their parts."""
        self.rng = fresh_rng()

    def __getstate__(self) -> dict[str, Any]:
        # a pickled copy (a spawned worker, copy.deepcopy) draws its own stream, never a replay
        state = dict(self.__dict__)
        state.pop("_rng", None)
        state.pop("_rng_fork", None)
        return state

    _init = BaseTransform._init  # tensorpack's helper: self._init(locals()) keeps the arguments

    def _rand_range(self, low: float = 1.0, high: float | None = None, size: Any = None) -> Any:
        """Uniform float32 number(s) in ``[low, high)`` (``[0, low)`` without ``high``)."""
        if high is None:
            low, high = 0, low
        return (
            np.float32(self.rng.uniform(low, high))
            if size is None
            else (self.rng.uniform(low, high, size).astype(np.float32))
        )

    def __repr__(self) -> str:
        return default_repr(self)

    def get_transform(self, img: np.ndarray) -> Any:
        """Draw the random parameters for ``img`` and return the deterministic Transform.

        The default supports tensorpack's older protocol (``_get_augment_params(img)``,
        ``_augment(img, params)``, ``_augment_coords(coords, params)``) with one
        ``DeprecationWarning``; new augmentors override this method."""
        augment = getattr(self, "_augment", None)
        if augment is None:
            raise NotImplementedError(f"{type(self).__name__} must implement get_transform(img)")
        warn_once(
            f"imgaug.legacy.{type(self).__name__}",
            f"{type(self).__name__} uses the old augmentor interface (_augment/_get_augment_params); "
            f"implement get_transform(img) instead",
        )
        get_params = getattr(self, "_get_augment_params", None) or getattr(self, "get_augment_params", None)
        p = get_params(img) if get_params is not None else None
        if isinstance(p, BaseTransform):
            return p
        coords_fn = getattr(self, "_augment_coords", None)
        return TransformFactory(
            name=f"LegacyConversion -- {self!r}",
            apply_image=lambda im: augment(im, p),
            apply_coords=(lambda c: coords_fn(c, p)) if coords_fn is not None else (lambda c: c),
        )

    def augment(self, img: np.ndarray) -> np.ndarray:
        """``self.get_transform(img).apply_image(img)``: augment one image."""
        check_dtype(img, type(self).__name__)
        return self.get_transform(img).apply_image(img)  # type: ignore[no-any-return]

    # -- tensorpack's deprecated spellings ----------------------------------------------------
    def augment_return_params(self, d: np.ndarray) -> tuple[np.ndarray, Any]:
        """Deprecated: ``t = get_transform(d); return t.apply_image(d), t``."""
        warn_once("imgaug.augment_return_params", "augment_return_params is deprecated: use get_transform")
        t = self.get_transform(d)
        return t.apply_image(d), t

    def augment_with_params(self, d: np.ndarray, param: Any) -> np.ndarray:
        """Deprecated: ``param.apply_image(d)``."""
        warn_once(
            "imgaug.augment_with_params", "augment_with_params is deprecated: use transform.apply_image"
        )
        return param.apply_image(d)  # type: ignore[no-any-return]

    def augment_coords(self, coords: np.ndarray, param: Any) -> np.ndarray:
        """Deprecated: ``param.apply_coords(coords)`` (``param`` from :meth:`get_transform`)."""
        warn_once("imgaug.augment_coords", "augment_coords is deprecated: use transform.apply_coords")
        return param.apply_coords(coords)  # type: ignore[no-any-return]


Augmentor = ImageAugmentor  # tensorpack's legacy name


def as_augmentor(obj: Any, stage: str) -> ImageAugmentor:
    """``obj`` itself if it is an augmentor; an Albumentations transform wrapped in
    :class:`~dataflow.imgaug.Albumentations`; any other callable (a torchvision-style
    ``img -> img`` transform, a function) wrapped to apply to images only."""
    if isinstance(obj, ImageAugmentor):
        return obj
    if looks_like_albumentations(obj):
        return Albumentations(obj)
    if callable(obj) and not isinstance(obj, type):
        return ImageFunction(obj)
    raise TypeError(
        f"{stage}: an augmentor must be an imgaug.ImageAugmentor, an Albumentations transform or a "
        f"callable img -> img, got {type(obj).__name__} ({obj!r:.60})"
    )


class _Composed(ImageAugmentor):
    """An augmentor made of augmentors (its ``_parts()``): resetting it reseeds it and every
    part."""

    def _parts(self) -> list[ImageAugmentor]:
        raise NotImplementedError

    def reset_state(self) -> None:
        """Reseed this augmentor and every augmentor in it."""
        super().reset_state()
        for a in self._parts():
            a.reset_state()


class AugmentorList(_Composed):
    """Apply ``augmentors`` in order; each one's parameters are drawn from the image the ones
    before it produced. Items that are not augmentors are wrapped (see :func:`as_augmentor`)."""

    def __init__(self, augmentors: list[Any] | tuple[Any, ...]) -> None:
        if not isinstance(augmentors, (list, tuple)):
            raise TypeError(
                f"AugmentorList: augmentors must be a list or tuple, got {type(augmentors).__name__}"
            )
        self.augmentors = [as_augmentor(a, "AugmentorList") for a in augmentors]

    def _parts(self) -> list[ImageAugmentor]:
        return self.augmentors

    def get_transform(self, img: np.ndarray) -> Any:
        """A :class:`TransformList`; the augmentors after the first draw their parameters when
        ``apply_image`` first runs (they need the image the earlier ones produce)."""
        check_dtype(img, "AugmentorList")
        check_image_ndim(img, "AugmentorList")
        tfms: list[Any] = []
        for i, a in enumerate(self.augmentors):
            t = a.get_transform(img) if i == 0 else LazyTransform(a.get_transform)
            if isinstance(t, TransformList):
                tfms.extend(t.tfms)
            else:
                tfms.append(t)
        return TransformList(tfms)

    def augment_with_transform(self, img: np.ndarray) -> tuple[np.ndarray, Any]:
        """``(augmented image, TransformList)`` in one pass (no lazy transforms): what
        ``get_transform`` then ``apply_image`` give, with less overhead."""
        check_dtype(img, "AugmentorList")
        check_image_ndim(img, "AugmentorList")
        tfms = []
        for a in self.augmentors:
            t = a.get_transform(img)
            img = t.apply_image(img)
            tfms.append(t)
        return img, TransformList(tfms)

    def augment(self, img: np.ndarray) -> np.ndarray:
        check_dtype(img, "AugmentorList")
        check_image_ndim(img, "AugmentorList")
        for a in self.augmentors:
            img = a.get_transform(img).apply_image(img)
        return img

    def __repr__(self) -> str:
        inner = ",\n".join("  " + repr(a) for a in self.augmentors)
        return f"imgaug.AugmentorList([\n{inner}])"


class PhotometricAugmentor(ImageAugmentor):
    """An augmentor that changes pixel values only: coordinates pass unchanged.

    Subclasses implement ``_get_augment_params(img)`` (default: ``None``) and
    ``_augment(img, params)``."""

    def get_transform(self, img: np.ndarray) -> Any:
        return BoundPhotometricTransform(self, self._get_augment_params(img))

    def _get_augment_params(self, _: Any) -> Any:
        return None

    def _augment(self, img: np.ndarray, param: Any) -> np.ndarray:
        raise NotImplementedError(f"{type(self).__name__} must implement _augment(img, param)")


def looks_like_albumentations(obj: Any) -> bool:
    """An Albumentations transform (or anything with its call shape: ``obj(image=img)``
    returning a dict, plus ``set_random_seed`` or ``get_params``/``apply``)."""
    if type(obj).__module__.split(".")[0] == "albumentations":
        return True
    return (
        callable(obj)
        and (hasattr(obj, "set_random_seed") or (hasattr(obj, "get_params") and hasattr(obj, "apply")))
        and hasattr(obj, "targets")
    )


def _image_only(kind: str) -> Callable[[Any], Any]:
    def apply_coords(coords: Any) -> Any:
        raise NotImplementedError(
            f"{kind} transforms images only and cannot transform coordinates; use dataflow.imgaug's "
            f"geometric augmentors (or MapImage(func, coord_func)) for images with coordinates"
        )

    return apply_coords


class AlbumentationsTransform(Transform):
    """One draw of an Albumentations transform: the same seed for every image it is applied
    to, so an image and its mask of the same size get the same change."""

    def __init__(self, aug: Any, seed: int, lock: threading.Lock) -> None:
        self.aug, self.seed, self._lock = aug, seed, lock
        self.apply_coords = _image_only("An Albumentations")

    def apply_image(self, img: np.ndarray) -> np.ndarray:
        aug = self.aug
        with self._lock:  # seeding then drawing must not interleave with another thread
            if hasattr(aug, "set_random_seed"):
                aug.set_random_seed(self.seed)
                return aug(image=img)["image"]  # type: ignore[no-any-return]
            # Albumentations < 1.4: no per-transform seed; draw its parameters and apply them
            return aug.apply(img, **aug.get_params())  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return f"imgaug.AlbumentationsTransform({self.aug!r}, seed={self.seed})"


class Albumentations(ImageAugmentor):
    """Wrap an Albumentations transform (``albumentations.HorizontalFlip(p=0.5)``, a
    ``Compose``...). Images only: coordinates raise ``NotImplementedError``."""

    def __init__(self, augmentor: Any) -> None:
        if not callable(augmentor):
            raise TypeError(
                f"Albumentations: expected an albumentations transform, got {type(augmentor).__name__}"
            )
        self._aug = augmentor
        self._lock = threading.Lock()

    def get_transform(self, img: Any) -> Any:
        return AlbumentationsTransform(self._aug, int(self.rng.integers(2**32)), self._lock)

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state.pop("_lock", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"imgaug.Albumentations({self._aug!r})"


class ImageFunction(ImageAugmentor):
    """Apply ``func(img)`` to images only (what a plain callable or torchvision-style transform
    in an augmentor list becomes); coordinates raise ``NotImplementedError``."""

    def __init__(self, func: Callable[[np.ndarray], Any]) -> None:
        check_callable("ImageFunction", "func", func)
        self.func = func
        self._transform = _FunctionTransform(func)

    def get_transform(self, img: Any) -> Any:
        return self._transform

    def __repr__(self) -> str:
        return f"imgaug.ImageFunction({getattr(self.func, '__qualname__', self.func)!s})"


class _FunctionTransform(Transform):
    def __init__(self, func: Callable[[np.ndarray], Any]) -> None:
        self.func = func
        name = getattr(func, "__qualname__", None) or type(func).__name__
        self.apply_coords = _image_only(f"The callable {name}")

    def apply_image(self, img: np.ndarray) -> Any:
        return self.func(img)

    def __repr__(self) -> str:
        return f"imgaug.ImageFunction({getattr(self.func, '__qualname__', self.func)!s})"
