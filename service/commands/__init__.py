"""The commands that talk to a running service through the Python client
(trainjobs_client): jobs, templates, login. service/cli.py registers them."""
from __future__ import annotations


def register(sub) -> None:
    from service.commands import jobs, login, templates
    jobs.register(sub)
    templates.register(sub)
    login.register(sub)
