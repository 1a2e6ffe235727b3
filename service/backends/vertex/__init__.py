"""The vertex backend: jobs run as Vertex AI CustomJobs (backend.py maps its parts)."""
from service.backends.vertex.backend import VertexBackend
from service.backends.vertex.config import VertexConfigError
from service.backends.vertex.settings import VertexSettings

__all__ = ["VertexBackend", "VertexConfigError", "VertexSettings"]
