"""The local backend: one OS process per replica. backend.py's docstring maps its modules
in the order of a job's life (settings, runs, launcher, supervisor, backend); docs/local.md
describes it for operators."""
from service.backends.local.backend import LocalBackend
from service.backends.local.settings import LocalSettings

__all__ = ["LocalBackend", "LocalSettings"]
