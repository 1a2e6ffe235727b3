"""The benchmarks' tokens, made on the database as the CLI makes them: an operator's, and an
admin's for each team (bench/kueue_baseline.py, bench/forecast.py, bench/queue_scale.py)."""
from __future__ import annotations

from collections.abc import Iterable


def tokens(url: str, teams: Iterable[str]) -> tuple[str, dict[str, str]]:
    """Migrates the database at `url`, then: the operator's token and each team's admin token."""
    # Imported here: bench/queue_scale.py patches the controller before anything of it loads.
    from service.auth.service import create_token, get_or_create_team
    from service.persistence import migrate
    from service.persistence.session import make_engine, make_session_factory

    migrate.upgrade(url)
    engine = make_engine(url)
    try:
        with make_session_factory(engine)() as s:
            op = create_token(s, get_or_create_team(s, "ops"), "bench", "operator", "bench")[1]
            admins = {t: create_token(s, get_or_create_team(s, t), "bench", "admin", "bench")[1] for t in teams}
            s.commit()
    finally:
        engine.dispose()
    return op, admins
