"""The `trainjobs` command."""
from __future__ import annotations

import argparse
import logging
import sys


def _serve(args) -> int:
    import uvicorn

    from service import demo, migrate
    from service.app import create_app
    from service.config import get_settings
    from service.db import make_engine, make_session_factory

    settings = get_settings()
    migrate.upgrade(settings.database_url)
    if settings.seed_demo_template:
        engine = make_engine(settings.database_url)
        with make_session_factory(engine)() as session:
            if demo.seed(session):
                print("trainjobs: created the demo template 'mwms-demo'", file=sys.stderr)
        engine.dispose()
    host = args.host or settings.host
    port = args.port or settings.port
    print(f"trainjobs: serving on http://{host}:{port} (docs: http://{host}:{port}/docs)", file=sys.stderr)
    # log_config=None: uvicorn logs through our handlers (JSON with request ids);
    # its access log is off because the request middleware logs every request.
    uvicorn.run(create_app(settings), host=host, port=port, log_level=args.log_level,
                access_log=False, log_config=None)
    return 0


def _db(args) -> int:
    from service import migrate
    from service.config import get_settings

    url = get_settings().database_url
    if args.db_command == "upgrade":
        migrate.upgrade(url, args.revision)
    else:
        migrate.downgrade(url, args.revision)
    print(f"trainjobs: database {args.db_command}d to {args.revision}", file=sys.stderr)
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="trainjobs", description="Launch and follow distributed TensorFlow training.")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("serve", help="migrate the database, load the demo template, serve the API")
    s.add_argument("--host")
    s.add_argument("--port", type=int)
    s.add_argument("--log-level", default="info", help="debug, info, warning, error")
    s.set_defaults(func=_serve)

    d = sub.add_parser("db", help="database migrations")
    dsub = d.add_subparsers(dest="db_command", required=True)
    up = dsub.add_parser("upgrade", help="apply migrations (default: to head)")
    up.add_argument("revision", nargs="?", default="head")
    down = dsub.add_parser("downgrade", help="revert migrations to a revision")
    down.add_argument("revision")
    d.set_defaults(func=_db)
    return p


def main(argv: list[str] | None = None) -> int:
    from service.config import get_settings
    from service.observability import configure_logging

    args = build_parser().parse_args(argv)
    settings = get_settings()
    if settings.log_format == "json":
        configure_logging(getattr(args, "log_level", None) or settings.log_level)
    else:
        logging.basicConfig(level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
