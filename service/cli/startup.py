"""What `serve` and `prepare` say at start: the URLs to open, and a refusal to start as one
line with its fix (no traceback: the message is the whole story; an unexpected error
still gets its traceback)."""
from __future__ import annotations

import contextlib
import ipaddress
import logging
from collections.abc import Iterator


class Refusal(Exception):
    """The service cannot start as configured; the message says what to change."""


def base_url(host: str, port: int) -> str:
    """Where a person on this machine reaches the server: a wildcard bind is reached
    through the loopback address; an IPv6 literal is bracketed."""
    if host in ("", "0.0.0.0"):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    with contextlib.suppress(ValueError):
        if ipaddress.ip_address(host).version == 6:
            host = f"[{host}]"
    return f"http://{host}:{port}"


def serving_lines(url: str, workers: int = 1) -> str:
    many = f" with {workers} workers" if workers > 1 else ""
    return (f"trainjobs: serving on {url}{many}\n"
            f"    web UI:   {url}/ui\n"
            f"    API docs: {url}/docs\n"
            "  Ctrl-C stops it (running local jobs go on; the next start picks them up).")


def settings_or_refuse(section=None):
    """The process's settings (get_settings()), or only `section` of them for a command that needs
    no more (a client command: the core's, without loading the server's packages), a bad
    TRAINJOBS_* setting refused by name, value and reason."""
    from pydantic import ValidationError
    try:
        if section is not None:
            return section()
        from service.slices import get_settings
        return get_settings()
    except ValidationError as e:
        bad = "; ".join(f"TRAINJOBS_{'_'.join(str(p) for p in err['loc']).upper()}={err.get('input')!r}: "
                        f"{err['msg']}" for err in e.errors())
        raise Refusal(f"{bad} (fix the variable in the environment; what each allows: docs/settings.md)") from None


@contextlib.contextmanager
def database_answers(url: str) -> Iterator[None]:
    """An unreachable or refusing database, said in one line (the password left out)."""
    import psycopg
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import OperationalError
    try:
        yield
    except (OperationalError, psycopg.OperationalError) as e:   # psycopg's own: the migration lock's connection
        shown = make_url(url).render_as_string(hide_password=True)
        cause = getattr(e, "orig", None) or e
        why = (str(cause).strip().splitlines() or [e.__class__.__name__])[0]
        raise Refusal(f"the database {shown} does not answer ({why}): start it, or point "
                      "TRAINJOBS_DATABASE_URL at one that does") from None


def check_backends(settings) -> None:
    """What the app's start-up would refuse (a run folder others cannot reach, a sandbox this
    machine cannot make, a bad backend setting), found before the server starts. The app
    checks again when it starts; this one's log lines are muted so they are not said twice."""
    from service.slices import make_backends

    logging.disable(logging.WARNING)
    started = []
    try:
        for backend in make_backends(settings).values():
            backend.start_client()
            started.append(backend)
    except (ValueError, RuntimeError, OSError) as e:   # the backends' set-up refusals
        raise Refusal(str(e)) from None
    finally:
        for backend in started:
            backend.close()
        logging.disable(logging.NOTSET)
