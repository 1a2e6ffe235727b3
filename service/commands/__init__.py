"""The commands that talk to a running service through the Python client
(trainjobs_client): jobs, templates, teams, login. service/cli.py registers them."""
from __future__ import annotations


def register(sub) -> None:
    from service.commands import jobs, login, teams, templates
    jobs.register(sub)
    templates.register(sub)
    teams.register(sub)
    login.register(sub)
