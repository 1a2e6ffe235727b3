"""`trainjobs login` checks a token against the service and saves it (with the
URL) in a file only its owner can read; `logout` forgets it; `whoami` says who
the client speaks as and where its token comes from."""
from __future__ import annotations

import getpass
import os
import sys

from service.cli.client.common import (
    ERROR,
    OK,
    UsageError,
    client_options,
    escape,
    handles_errors,
    print_json,
    stderr_console,
)


def register(sub) -> None:
    p = client_options(sub.add_parser("login", help="save the service's URL and your token for the commands"))
    p.add_argument("--token-stdin", action="store_true", help="read the token from stdin (for scripts)")
    p.set_defaults(func=login)
    out = sub.add_parser("logout", help="forget the saved token")
    out.set_defaults(func=logout)
    w = client_options(sub.add_parser("whoami", help="the token the commands use: team, role, where it comes from"))
    w.set_defaults(func=whoami)


def _read_token(args) -> str:
    if args.token_stdin or not sys.stdin.isatty():
        token = sys.stdin.readline().strip()
    else:
        token = getpass.getpass("token (tj_...): ").strip()
    if not token:
        raise UsageError("no token given")
    return token


@handles_errors
def login(args) -> int:
    from trainjobs_client import Client, config
    url = (args.url or os.environ.get("TRAINJOBS_URL") or config.read_config_file().get("url")
           or config.DEFAULT_URL).rstrip("/")
    token = _read_token(args)
    with Client(url=url, token=token) as client:
        me = client.whoami()  # a wrong URL or token fails here, and nothing is saved
    path = config.save_config(url, token)
    if args.output == "json":
        print_json({"url": url, "config": str(path), "token": me})
    else:
        stderr_console().print(f"logged in to {escape(url)} as [bold]{escape(me.name)}[/] ({me.role} of team "
                               f"{escape(me.team)}); saved in {escape(str(path))}")
        if os.environ.get("TRAINJOBS_TOKEN"):
            stderr_console().print("[yellow]note: TRAINJOBS_TOKEN is set and takes precedence over the saved "
                                   "token[/]")
    return OK


@handles_errors
def logout(_args) -> int:
    from trainjobs_client import config
    path = config.config_path()
    data = config.read_config_file(path)
    if not data.get("token"):
        stderr_console().print(f"no saved token ({escape(str(path))})")
        return OK
    config.save_config(data.get("url") or config.DEFAULT_URL, "", path)
    stderr_console().print(f"forgot the token saved in {escape(str(path))}")
    return OK


@handles_errors
def whoami(args) -> int:
    from trainjobs_client import Client
    with Client(url=args.url) as client:
        source = client.config.source
        if client.config.token is None:
            stderr_console().print(f"no token for {escape(client.url)}: set TRAINJOBS_TOKEN or run `trainjobs login`")
            return ERROR
        me = client.whoami()
    if args.output == "json":
        print_json({"url": client.url, "token_source": source, "token": me})
    else:
        print(f"{me.name} ({me.role} of team {me.team}) at {client.url}; token from {source}")
    return OK
