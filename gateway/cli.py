"""Command line: ``gateway serve`` (one flag per non-secret setting, generated from ``Settings``), ``gateway keys``
and ``gateway mock-upstream``."""

from __future__ import annotations

import argparse
import sys
from typing import Callable

from gateway import __version__, openfiles
from gateway import settings as settings_module
from gateway.http import early_stop
from gateway.settings import Settings


def _serve_granian(target: str, host: str, port: int, workers: int, backlog: int, log_level: str,
                   kill_timeout: float | None = None, backpressure: int | None = None) -> None:
    from granian import Granian
    from granian.constants import Interfaces, Loops
    from granian.log import LogLevels

    server = Granian(
        target,
        address=host,
        port=port,
        interface=Interfaces.ASGI,
        workers=workers,
        loop=Loops.uvloop,
        backlog=backlog,
        backpressure=backpressure,
        log_level=LogLevels(log_level),
        log_access=False,
        workers_kill_timeout=int(kill_timeout) if kill_timeout else None,
        respawn_failed_workers=True,
    )
    early_stop.arm()  # a worker stopped before it listens for the signal still stops (gateway/http/early_stop.py)
    server.serve()


def cmd_serve(args: argparse.Namespace) -> int:
    settings_module.keep_files_private()  # the workers inherit it
    flags = {info.name: getattr(args, info.name) for info in settings_module.FIELDS
             if not info.secret and getattr(args, info.name) is not None}
    try:
        settings = settings_module.load(flags=flags)
    except ValueError as exc:
        print(f"gateway: bad setting: {exc}", file=sys.stderr)
        return 2
    from gateway.observability import multiproc

    metrics_dir, owned = multiproc.prepare(settings_module.data_path(settings, "metrics"))
    # after prepare: the store modules import prometheus_client, which must see the multiprocess directory
    from gateway.controlplane.keys_command import bootstrap_admin_key

    key = bootstrap_admin_key(settings)
    if key is not None:
        print(f"gateway: generated admin key (shown once, store it now): {key}", flush=True)
    settings_module.hand_to_workers(settings)
    backpressure, warning = openfiles.ensure(settings.backpressure)
    if warning is not None:
        print(f"gateway: {warning}", file=sys.stderr, flush=True)
    print(
        f"gateway {__version__}: serving on http://{settings.host}:{settings.port}/v1 "
        f"with {settings.workers} worker(s); data in {settings.data_dir}",
        flush=True,
    )
    try:
        _serve_granian(
            "gateway.app:app", settings.host, settings.port, settings.workers, settings.backlog,
            settings.log_level, settings.shutdown_grace_s, backpressure,
        )
    finally:
        if owned:
            multiproc.remove(metrics_dir)
    return 0


def cmd_mock(args: argparse.Namespace) -> int:
    print(f"gateway mock-upstream: serving on http://{args.host}:{args.port}", flush=True)
    # as many streams at once as a gateway worker serves by default, so a burst measures the gateway, not the mock
    backpressure, warning = openfiles.ensure(settings_module.BACKPRESSURE)
    if warning is not None:
        print(f"gateway mock-upstream: {warning}", file=sys.stderr, flush=True)
    _serve_granian("gateway_mock.app:app", args.host, args.port, args.workers, settings_module.BACKLOG,
                   "warning", backpressure=backpressure)
    return 0


def _with_settings(run: Callable[[argparse.Namespace, Settings], int], args: argparse.Namespace) -> int:
    """``run`` with the settings read from the environment; a bad one is exit 2 with a message naming it."""
    settings_module.keep_files_private()
    try:
        settings = settings_module.load()
    except ValueError as exc:
        print(f"gateway: bad setting: {exc}", file=sys.stderr)
        return 2
    return run(args, settings)


def cmd_keys(args: argparse.Namespace) -> int:
    from gateway.controlplane.keys_command import run

    return _with_settings(run, args)


def cmd_logs(args: argparse.Namespace) -> int:
    from gateway.observability.pglog.command import run

    return _with_settings(run, args)


_METAVARS = {int: "INTEGER", float: "NUMBER", tuple: "A,B,..."}


def add_setting_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per setting that is not a secret, named and described from its ``Settings`` field."""
    for info in settings_module.FIELDS:
        if info.secret:
            continue
        names = " or ".join((info.env, *info.aliases))
        text = f"{info.help} ({names}; default {info.default_text})".replace("%", "%%")
        if info.kind is bool:
            # ``--x`` turns it on and ``--no-x`` off; for a setting named ``no_x`` (``--no-x``) the off flag is
            # ``--x`` (argparse's BooleanOptionalAction would read any ``--no-`` flag as off)
            off = "--" + info.flag[5:] if info.flag.startswith("--no-") else "--no-" + info.flag[2:]
            pair = parser.add_mutually_exclusive_group()
            pair.add_argument(info.flag, dest=info.name, action="store_const", const=True, default=None, help=text)
            pair.add_argument(off, dest=info.name, action="store_const", const=False, default=None,
                              help=f"the opposite of {info.flag}")
        else:
            metavar = _METAVARS.get(info.kind, "TEXT")
            parser.add_argument(info.flag, dest=info.name, default=None, metavar=metavar, help=text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gateway", description="A fast AI gateway.")
    parser.add_argument("--version", action="version", version=f"gateway {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser(
        "serve", help="serve the gateway",
        description="Serve the gateway. Every setting is read from its variable; the flags below override them.",
        epilog="environment only (secrets): " + ", ".join(
            info.env for info in settings_module.FIELDS if info.secret),
    )
    add_setting_flags(serve)
    serve.set_defaults(func=cmd_serve)
    from gateway.controlplane.keys_command import add_parser as add_keys_parser

    add_keys_parser(sub)
    sub.choices["keys"].set_defaults(func=cmd_keys)
    from gateway.observability.pglog.command import add_parser as add_logs_parser

    add_logs_parser(sub)
    sub.choices["logs"].set_defaults(func=cmd_logs)
    mock = sub.add_parser("mock-upstream", help="serve the faithful local provider mock")
    mock.add_argument("--host", default="127.0.0.1")
    mock.add_argument("--port", type=int, default=9797)
    mock.add_argument("--workers", type=int, default=1)
    mock.set_defaults(func=cmd_mock)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
