"""tensorpack's image flows: :class:`ImageFromFile`, :class:`AugmentImageComponent`,
:class:`AugmentImageComponents`, :class:`AugmentImageCoordinates` (OpenCV is imported when a
flow first reads or augments an image, never by ``import dataflow``)."""

from ._augment import AugmentImageComponent, AugmentImageComponents, AugmentImageCoordinates
from ._from_file import ImageFromFile

__all__ = ["AugmentImageComponent", "AugmentImageComponents", "AugmentImageCoordinates", "ImageFromFile"]
