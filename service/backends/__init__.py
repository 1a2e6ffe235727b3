"""The backends, one package each under service/backends/ (local: sandboxed processes on this
host; vertex: Vertex AI CustomJobs; slurm: a team's own cluster). Each declares itself in its
entry.py (service/backends/registry.py finds it), reports facts through the roles of
lifecycle.protocol and is given only its own settings slice."""
