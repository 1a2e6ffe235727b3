"""The backends: local (sandboxed processes on this host), vertex (Vertex AI CustomJobs) and
slurm (a team's own cluster). Each reports facts through lifecycle.protocol.Backend and is
given only its own settings slice; service/slices.py (the composition root's settings half)
builds the enabled ones from the global Settings."""
from __future__ import annotations

KNOWN = ("local", "vertex", "slurm")
