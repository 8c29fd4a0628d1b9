"""Dataset loaders with tensorpack's names and arguments, reading the official files from disk.

Each loader reads the files in their official layout from an explicit directory argument, else
``$TENSORPACK_DATASET/<name>``, else ``~/tensorpack_data/<name>`` (where tensorpack put them).
Nothing is downloaded: a missing file raises :class:`FileNotFoundError` saying where to get
it. Every loader is a random-access source (:class:`~dataflow.DataFromArrays`): ``shuffle``
draws a permutation per epoch from ``self.rng`` (``seed=`` for reproducibility), and
``state_dict()``/``.shard()`` work by index. CIFAR's pickles are read by a restricted
unpickler that accepts only plain data and numpy arrays; SVHN, Caltech101 and BSDS500 need
SciPy; ``ILSVRC12``, ``TinyImageNet``, ``Places365Standard`` and ``BSDS500`` need OpenCV
(``pip install "dataflow-ml[datasets,image]"``).
"""

from .bsds500 import BSDS500
from .caltech101 import Caltech101Silhouettes
from .cifar import Cifar10, Cifar100, CifarBase
from .ilsvrc import ILSVRC12, ILSVRC12Files, ILSVRCMeta, TinyImageNet
from .mnist import FashionMnist, Mnist
from .places import Places365Standard
from .svhn import SVHNDigit

__all__ = [
    "BSDS500",
    "Caltech101Silhouettes",
    "Cifar10",
    "Cifar100",
    "CifarBase",
    "FashionMnist",
    "ILSVRC12",
    "ILSVRC12Files",
    "ILSVRCMeta",
    "Mnist",
    "Places365Standard",
    "SVHNDigit",
    "TinyImageNet",
]
