"""The vertex backend: jobs run as Vertex AI CustomJobs (see backend.py)."""
from service.backends.vertex.backend import VertexBackend
from service.backends.vertex.config import VertexConfigError

__all__ = ["VertexBackend", "VertexConfigError"]
