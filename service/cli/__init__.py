"""The `trainjobs` command: the service's own commands (main.py: serve, prepare, tokens, …) and
the client commands (client/) that talk to a running service through trainjobs_client."""
