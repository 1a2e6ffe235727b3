"""The local backend: one OS process per replica (see backend.py and docs/local.md)."""
from service.backends.local.backend import LocalBackend

__all__ = ["LocalBackend"]
