"""Interop with Google's own tools: AI Platform Training configs, gcloud flags and Vertex
--config files imported as templates; jobs and templates exported as gcloud commands,
--config files and Vertex SDK snippets (docs/interop.md)."""
