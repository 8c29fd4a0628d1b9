"""tensorpack's image augmentors (``tensorpack.dataflow.imgaug``), on OpenCV.

Every name of tensorpack 0.11's ``imgaug`` is here with its parameters and defaults; OpenCV
is imported when an augmentor first runs, not by ``import dataflow`` (a missing OpenCV raises
an ``ImportError`` naming ``pip install "dataflow-ml[image]"``). See the "Images and
augmentation" docs page for the contract (``get_transform`` / ``apply_image`` /
``apply_coords``), the RNG and resume guarantees, and what differs from tensorpack.
"""

from .base import Augmentor, AugmentorList, ImageAugmentor, PhotometricAugmentor
from .convert import ColorSpace, Grayscale, ToFloat32, ToUint8
from .crop import CenterCrop, GoogleNetRandomCropAndResize, RandomCrop, RandomCropRandomShape, RandomCutout
from .external import Albumentations, IAAugmentor, ImageFunction
from .geometry import Affine, Rotation, RotationAndCropValid, Shift
from .imgproc import (
    Brightness,
    BrightnessScale,
    Clip,
    Contrast,
    Gamma,
    GaussianBlur,
    Hue,
    Lighting,
    MeanVarianceNormalize,
    MinMaxNormalize,
    Saturation,
)
from .meta import Identity, MapImage, RandomApplyAug, RandomChooseAug, RandomOrderAug
from .misc import Flip, RandomResize, Resize, ResizeShortestEdge, Transpose
from .noise import GaussianNoise, JpegNoise, SaltPepperNoise
from .paste import BackgroundFiller, CenterPaste, ConstantBackgroundFiller, RandomPaste
from .transform import (
    CropTransform,
    FlipTransform,
    LazyTransform,
    NoOpTransform,
    PasteTransform,
    PhotometricTransform,
    ResizeTransform,
    Transform,
    TransformFactory,
    TransformList,
    TransposeTransform,
    WarpAffineTransform,
)

__all__ = [
    "Affine",
    "Albumentations",
    "Augmentor",
    "AugmentorList",
    "BackgroundFiller",
    "Brightness",
    "BrightnessScale",
    "CenterCrop",
    "CenterPaste",
    "Clip",
    "ColorSpace",
    "ConstantBackgroundFiller",
    "Contrast",
    "CropTransform",
    "Flip",
    "FlipTransform",
    "Gamma",
    "GaussianBlur",
    "GaussianNoise",
    "GoogleNetRandomCropAndResize",
    "Grayscale",
    "Hue",
    "IAAugmentor",
    "Identity",
    "ImageAugmentor",
    "ImageFunction",
    "JpegNoise",
    "LazyTransform",
    "Lighting",
    "MapImage",
    "MeanVarianceNormalize",
    "MinMaxNormalize",
    "NoOpTransform",
    "PasteTransform",
    "PhotometricAugmentor",
    "PhotometricTransform",
    "RandomApplyAug",
    "RandomChooseAug",
    "RandomCrop",
    "RandomCropRandomShape",
    "RandomCutout",
    "RandomOrderAug",
    "RandomPaste",
    "RandomResize",
    "Resize",
    "ResizeShortestEdge",
    "ResizeTransform",
    "Rotation",
    "RotationAndCropValid",
    "SaltPepperNoise",
    "Saturation",
    "Shift",
    "ToFloat32",
    "ToUint8",
    "Transform",
    "TransformFactory",
    "TransformList",
    "Transpose",
    "TransposeTransform",
    "WarpAffineTransform",
]
