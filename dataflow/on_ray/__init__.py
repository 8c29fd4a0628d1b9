"""Scale-out on Ray: a parallel map on Ray actors, a runner of flow copies on Ray workers,
and interop with Ray Data. Importing this package does not import Ray: Ray is imported
(and, if needed, a local Ray started) when a Ray flow is reset or converted."""

from ._interop import DataFromRay, from_ray, to_ray
from ._maps import RayMapData
from ._runner import RayRunner

__all__ = ["DataFromRay", "RayMapData", "RayRunner", "from_ray", "to_ray"]
