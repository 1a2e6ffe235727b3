"""The `trainjobs` command."""
from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path


def _prepare(args=None, url: str | None = None) -> int:
    """Migrate, make the first admin token on an empty database, load the demo template.
    url: where the service will answer, for the banner's examples."""
    from sqlalchemy.exc import IntegrityError

    from service import demo
    from service.auth.service import bootstrap_admin
    from service.cli.startup import base_url, check_backends, database_answers, settings_or_refuse
    from service.persistence import migrate
    from service.persistence.session import make_engine, make_session_factory

    settings = settings_or_refuse()
    url = url or getattr(args, "url", None) or base_url(settings.host, settings.port)
    _refuse_sqlite_in_container(settings)
    _check_price_file(settings)
    check_backends(settings)
    with database_answers(settings.database_url):
        migrate.upgrade(settings.database_url)
    engine = make_engine(settings.database_url)
    with make_session_factory(engine)() as session:
        secret = bootstrap_admin(session, settings.bootstrap_token)
        if secret and settings.bootstrap_token:
            print("trainjobs: first start: the admin token of team 'default' is the one in "
                  "TRAINJOBS_BOOTSTRAP_TOKEN", file=sys.stderr)
        elif secret and settings.bootstrap_token_file:
            _write_secret(Path(settings.bootstrap_token_file), secret)
            print(f"trainjobs: first start: admin token for team 'default' written to "
                  f"{settings.bootstrap_token_file} (mode 0600); it is not logged", file=sys.stderr)
        elif secret:
            print("\n" + "=" * 72 + "\ntrainjobs: first start. Admin token for team 'default' (shown once,"
                  f" store it now):\n\n    {secret}\n\n  export TRAINJOBS_TOKEN={secret}\n"
                  f"  curl -H \"Authorization: Bearer $TRAINJOBS_TOKEN\" {url}/v1/templates\n"
                  f"  Sign in to the web UI ({url}/ui) with it, or click Authorize in the docs ({url}/docs).\n"
                  "  Lost it? trainjobs tokens create --team default --role admin --name me  (here, same database)\n"
                  + "=" * 72 + "\n", file=sys.stderr, flush=True)
        try:
            seeded = settings.seed_demo_template and demo.seed(session, image=settings.trainer_image)
        except IntegrityError:  # another process starting at the same moment seeded it first
            session.rollback()
            seeded = False
        if seeded:
            print(f"trainjobs: the demo template 'mwms-demo' in team 'default' {_demo_runs(settings)}",
                  file=sys.stderr)
    engine.dispose()
    return 0


def _demo_runs(settings) -> str:
    from service.slices import demo_runs  # the composition root's: it reads the backends' entries

    return demo_runs(settings)


def _check_price_file(settings) -> None:
    from service.cost.prices import PriceFileError, load
    try:
        load(settings.price_file)
    except PriceFileError as e:
        raise SystemExit(f"trainjobs: refusing to start: {e}") from None


def _refuse_sqlite_in_container(settings) -> None:
    if settings.in_container and settings.database_url.startswith("sqlite") and not settings.allow_sqlite_in_container:
        raise SystemExit(
            "trainjobs: refusing to start on a SQLite file inside a container: it is lost with the container, "
            "and several replicas cannot share it. Set TRAINJOBS_DATABASE_URL=postgresql+psycopg://... "
            "(or TRAINJOBS_ALLOW_SQLITE_IN_CONTAINER=true for a throwaway try-out with a mounted volume)")


def _write_secret(path: Path, secret: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secret + "\n")
    os.chmod(path, 0o600)


def _exit_now(code: int) -> int:
    """Exit with `code` once the server has stopped, without the interpreter's teardown: it
    freed the whole app object by object, up to ~2 s of silence after "Finished server
    process" (issue 37). Only when every other thread has ended (the app's shutdown joined
    them): nothing is left to finish, and logs and output are flushed first."""
    import logging
    import threading

    if threading.active_count() != 1:
        return code
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _serve(args) -> int:
    import uvicorn

    from service.cli.startup import base_url, serving_lines, settings_or_refuse
    from service.web.protocol import Server, uvicorn_options

    settings = settings_or_refuse()
    args.log_level = (args.log_level or settings.log_level).lower()
    workers = args.workers or settings.workers
    host = args.host or settings.host
    port = settings.port if args.port is None else args.port
    # log_config=None: uvicorn logs through our handlers (JSON with request ids);
    # its access log is off because the request middleware logs every request.
    if workers == 1:
        from service.app import create_app
        # With --port 0 the port is known once bound: the banner points at the line that says it.
        _prepare(url=base_url(host, port) if port else "http://HOST:PORT (the address printed below)")
        server = Server(uvicorn.Config(create_app(settings), host=host, port=port, log_level=args.log_level,
                                       access_log=False, log_config=None, **uvicorn_options(settings)))
        # Once listening, with the port really bound (--port 0 picks one).
        server.on_started = lambda bound: print(serving_lines(base_url(host, bound[1])), file=sys.stderr, flush=True)
        server.run()
        if not server.started:
            return 3  # the app refused to start (uvicorn logged why), as `uvicorn.run` exits
        return _exit_now(130 if server.signal_received == signal.SIGINT else 0)
    # Several processes: the supervisor stays small (the preparation runs in a child
    # process), each worker builds its app from the environment and stands for
    # election; the one that wins (per database) also runs the lifecycle loops.
    import subprocess

    from service.web.supervision import SUPERVISOR_ENV
    prepared = subprocess.run([sys.executable, "-m", "service.cli", "prepare", "--url", base_url(host, port)])
    if prepared.returncode:
        return prepared.returncode  # it said why
    os.environ["TRAINJOBS_WORKERS"] = str(workers)
    os.environ["TRAINJOBS_LOG_LEVEL"] = args.log_level.upper()
    os.environ["TRAINJOBS_LOCAL_WORK_DIR"] = str(Path(settings.resolved_local_work_dir()).resolve())
    os.environ[SUPERVISOR_ENV] = str(os.getpid())
    print(serving_lines(base_url(host, port), workers), file=sys.stderr, flush=True)
    uvicorn.run("service.app:create_app", factory=True, workers=workers, host=host, port=port,
                log_level=args.log_level, access_log=False, log_config=None,
                **uvicorn_options(settings, workers=workers))
    return 0


def _db(args) -> int:
    from service.cli.startup import settings_or_refuse
    from service.persistence import local_db, migrate

    url = settings_or_refuse().database_url
    if not local_db.check(url, create_ok=getattr(args, "create", False)):
        return 2
    if args.db_command == "upgrade":
        migrate.upgrade(url, args.revision)
    else:
        migrate.downgrade(url, args.revision)
    print(f"trainjobs: database {args.db_command}d to {args.revision}", file=sys.stderr)
    return 0


def _tokens(args) -> int:
    from service.auth import service as auth
    from service.cli.startup import settings_or_refuse
    from service.core.errors import DomainError
    from service.persistence import local_db, migrate
    from service.persistence.session import make_engine, make_session_factory

    settings = settings_or_refuse()
    if not local_db.check(settings.database_url):
        return 2
    migrate.upgrade(settings.database_url)
    engine = make_engine(settings.database_url)
    try:
        with make_session_factory(engine)() as session:
            if args.tokens_command == "create":
                team = auth.get_or_create_team(session, args.team)
                token, secret = auth.create_token(session, team, args.name, args.role, "cli")
                session.commit()
                print(f"created token {token.id} ({args.role} of team {args.team}); shown once:", file=sys.stderr)
                print(secret)
            elif args.tokens_command == "list":
                team_id = None
                if args.team:
                    team_id = auth.get_or_create_team(session, args.team).id
                for t in auth.list_tokens(session, team_id):
                    state = f"revoked {t.revoked_at:%Y-%m-%d %H:%M}" if t.revoked_at else "active"
                    print(f"{t.id}  {t.team.name:<16} {t.role:<7} {t.name:<20} {t.prefix}...  {state}")
            else:
                import service.sweeps.service  # noqa: F401 - registers its revocation hook (sweeps pause)
                token = auth.revoke(session, args.token_id, None)
                session.commit()
                print(f"revoked token {token.id} ({token.name})", file=sys.stderr)
    except DomainError as e:
        print(f"trainjobs: {e.detail}", file=sys.stderr)
        return 2
    finally:
        engine.dispose()
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="trainjobs", description="Launch and follow distributed TensorFlow training.")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("serve", help="migrate the database, load the demo template, serve the API")
    s.add_argument("--host")
    s.add_argument("--port", type=int)
    s.add_argument("--workers", type=int, help="API worker processes (default 1, or TRAINJOBS_WORKERS)")
    s.add_argument("--log-level", help="debug, info, warning, error (default: TRAINJOBS_LOG_LEVEL, info)")
    s.set_defaults(func=_serve)

    pr = sub.add_parser("prepare", help="what serve does first: migrate, first admin token, demo template")
    pr.add_argument("--url", help="where the service will answer, for the first-start banner's examples")
    pr.set_defaults(func=_prepare)

    d = sub.add_parser("db", help="database migrations")
    dsub = d.add_subparsers(dest="db_command", required=True)
    up = dsub.add_parser("upgrade", help="apply migrations (default: to head)")
    up.add_argument("revision", nargs="?", default="head")
    up.add_argument("--create", action="store_true", help="create the database if it does not exist (SQLite)")
    down = dsub.add_parser("downgrade", help="revert migrations to a revision")
    down.add_argument("revision")
    d.set_defaults(func=_db)

    import uuid
    t = sub.add_parser("tokens", help="API tokens: create, list, revoke")
    tsub = t.add_subparsers(dest="tokens_command", required=True)
    c = tsub.add_parser("create", help="create a token (and its team if new); prints the secret once")
    c.add_argument("--team", required=True)
    c.add_argument("--role", required=True, choices=["viewer", "member", "admin", "operator"],
                   help="operator: the service's admin (capacity, team shares, priority classes); only here")
    c.add_argument("--name", required=True, help="who or what uses it")
    ls = tsub.add_parser("list", help="list tokens (never their secrets)")
    ls.add_argument("--team")
    r = tsub.add_parser("revoke", help="revoke a token by id")
    r.add_argument("token_id", type=uuid.UUID)
    t.set_defaults(func=_tokens)

    from service.cli.client import register
    register(sub)  # jobs, templates, login, logout, whoami: talk to a running service's API
    from service.cli import simulate
    simulate.register(sub.choices["queue"])  # `queue simulate`: reads the database, as `tokens` does
    return p


def main(argv: list[str] | None = None) -> int:
    from service.cli.startup import Refusal, settings_or_refuse
    from service.core.config import CoreEnv
    from service.core.logging_setup import configure_logging

    args = build_parser().parse_args(argv)
    try:
        settings = settings_or_refuse(CoreEnv)   # each server command reads all of them itself
        configure_logging(getattr(args, "log_level", None) or settings.log_level, settings.log_format)
        return args.func(args)
    except Refusal as e:
        print(f"trainjobs: refusing to start: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
