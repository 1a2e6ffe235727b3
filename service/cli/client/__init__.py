"""The commands that talk to a running service through the Python client
(trainjobs_client): jobs, sweeps, templates, teams, queue, login. service/cli.py registers them."""
from __future__ import annotations


def register(sub) -> None:
    from service.cli.client import jobs, login, queue, sweeps, teams, templates
    jobs.register(sub)
    sweeps.register(sub)
    templates.register(sub)
    teams.register(sub)
    queue.register(sub)
    login.register(sub)
