"""``agentwatch collector`` and ``agentwatch keys create|revoke|list`` (plus ``reprice``, ``whatif``, ``delete``).

Key commands work whether or not a collector runs: an embedded chDB directory can be opened
by one process only, so while a collector owns it they go through its admin endpoints
(authenticated by the admin token it wrote into the data directory); otherwise they open
the store directly.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, TypeVar

from agentwatch_api.client import ApiError, CollectorClient, CollectorError
from agentwatch_api.handshake import running_collector
from agentwatch_platform.collector import plugins, tuning
from agentwatch_platform.collector.api.deletion_cli import register_delete
from agentwatch_platform.collector.query.reprice import register_reprice
from agentwatch_platform.collector.query.whatif_cli import register_whatif
from agentwatch_platform.collector.settings import Settings


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """The collector's commands; ``agentwatch collector`` runs with the installed plugins inside (the alerts)."""
    _register_collector(sub)
    _register_keys(sub)
    register_reprice(sub)
    register_whatif(sub)
    register_delete(sub)


def _register_collector(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("collector", help="run the collector (OTLP/HTTP + query API, OTLP/gRPC)")
    p.add_argument("--host", default=None, help="address to bind (default 127.0.0.1, AGENTWATCH_HOST)")
    p.add_argument("--port", type=int, default=None, help="OTLP/HTTP and API port (default 4318)")
    p.add_argument("--grpc-port", type=int, default=None, help="OTLP/gRPC port (default 4317, 0 disables)")
    p.add_argument("--data-dir", type=Path, default=None, help="chDB data, spool and key files (default .agentwatch)")
    p.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))
    p.set_defaults(func=run_collector)


def _register_keys(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("keys", help="manage project API keys")
    ksub = p.add_subparsers(dest="keys_command", metavar="ACTION", required=True)
    create = ksub.add_parser("create", help="create a key; it is printed once, as the last line")
    create.add_argument("--project", required=True)
    create.add_argument("--name", default="", help="a note on what the key is for")
    create.add_argument(
        "--scope",
        default="ingest",
        metavar="SCOPES",
        help="comma-separated: ingest (send spans, feedback; what an agent needs), read (query API, "
        "dashboard), admin (keys, engines, reprice, alert writes). Default: ingest",
    )
    revoke = ksub.add_parser("revoke", help="revoke a key by its id")
    revoke.add_argument("key_id")
    listing = ksub.add_parser("list", help="list keys (ids, projects, scopes, state; never the keys)")
    listing.add_argument("--json", action="store_true", help="machine-readable output")
    for parser, func in ((create, keys_create), (revoke, keys_revoke), (listing, keys_list)):
        parser.add_argument(
            "--data-dir", type=Path, default=None, help="the collector's data dir (default .agentwatch)"
        )
        parser.set_defaults(func=func)


# --- collector ---------------------------------------------------------------------------------


def run_collector(args: argparse.Namespace) -> int:
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = Settings.from_env(host=args.host, port=args.port, grpc_port=args.grpc_port, data_dir=args.data_dir)
    if (problem := _preflight(settings)) is not None:
        print(f"agentwatch collector: {problem}", file=sys.stderr)
        return 1
    _quiet_libraries()
    tuning.before_imports(keep_pandas_out=not settings.collector_pandas)

    import uvicorn

    from agentwatch_platform.collector.api.header_timeout import header_timeout_protocol
    from agentwatch_platform.collector.app import create_app

    app = create_app(settings, plugins=plugins.installed())
    tuning.after_start_up(malloc_mmap_threshold_bytes=settings.malloc_mmap_threshold_bytes)
    uvicorn.run(
        app,
        host=settings.host,
        port=settings.port,
        log_level=args.log_level,
        access_log=False,
        timeout_graceful_shutdown=15,
        http=header_timeout_protocol(settings.header_read_timeout_s),
    )
    return 0


def _preflight(settings: Settings) -> str | None:
    """The first reason the collector cannot start, found before anything is created or opened.

    Without it a collector on a taken port first created its data directory and ran every
    migration, then failed; one on a data directory it cannot write started anyway, answered 503
    and warned every few seconds. The command exits with this one line instead."""
    return (
        _port_problem(settings.host, settings.port, "the OTLP/HTTP and API", "--port")
        or _port_problem(settings.host, settings.grpc_port, "the OTLP/gRPC", "--grpc-port (0 disables gRPC)")
        or _data_dir_problem(settings.data_dir)
    )


def _port_problem(host: str, port: int, what: str, flag: str) -> str | None:
    """Why ``host:port`` cannot be bound (bound as the servers do, with SO_REUSEADDR), or None."""
    if port == 0:
        return None
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    except OSError as exc:
        return f"cannot bind {what} to {host}: {exc.strerror or exc}"
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT is no obstacle to the server either
        try:
            sock.bind((host, port))
        except OSError as exc:
            return (
                f"{what} port {port} on {host} is taken ({exc.strerror or exc}): "
                f"stop what listens there or pick another with {flag}"
            )
    return None


def _data_dir_problem(path: Path) -> str | None:
    """Why ``path`` cannot serve as the data directory (not a directory, not writable, cannot be
    created), or None. Nothing is created: a missing directory is judged by its nearest existing parent."""
    if path.exists():
        if not path.is_dir():
            return f"data directory {path} is not a directory"
        return None if _writable(path) else f"data directory {path} is not writable"
    parent = _nearest_existing(path)
    if not parent.is_dir():
        return f"data directory {path} cannot be created: {parent} is not a directory"
    if not _writable(parent):
        return f"data directory {path} cannot be created: {parent} is not writable"
    return None


def _nearest_existing(path: Path) -> Path:
    for parent in path.absolute().parents:
        if parent.exists():
            return parent
    return Path("/")


def _writable(path: Path) -> bool:
    return os.access(path, os.W_OK | os.X_OK)


def _quiet_libraries() -> None:
    """httpx logs every request at INFO: one line per engine scrape was 836 of a demo collector's
    865 log lines. Its warnings still show (and, with ``--log-level debug``, everything)."""
    if logging.getLogger().getEffectiveLevel() > logging.DEBUG:
        logging.getLogger("httpx").setLevel(logging.WARNING)


# --- keys ----------------------------------------------------------------------------------------


T = TypeVar("T")


class _Keys(Protocol):
    def create(self, project: str, name: str, scopes: tuple[str, ...]) -> dict[str, Any]: ...
    def revoke(self, key_id: str) -> dict[str, Any]: ...
    def list(self) -> list[dict[str, Any]]: ...
    def close(self) -> None: ...


class _RemoteKeys:
    """Through a running collector's admin endpoints."""

    def __init__(self, url: str, token: str) -> None:
        self._client = CollectorClient(url, token, timeout_s=30)

    def create(self, project: str, name: str, scopes: tuple[str, ...]) -> dict[str, Any]:
        return _answered(lambda: self._client.create_key(project, name, scopes))

    def revoke(self, key_id: str) -> dict[str, Any]:
        return _answered(lambda: self._client.revoke_key(key_id))

    def list(self) -> list[dict[str, Any]]:
        return _answered(self._client.keys)

    def close(self) -> None:
        self._client.close()


def _answered(call: Callable[[], T]) -> T:
    try:
        return call()
    except ApiError as exc:
        raise SystemExit(f"agentwatch keys: the collector answered {exc.status}: {exc.detail}") from None
    except CollectorError as exc:
        raise SystemExit(f"agentwatch keys: {exc}") from None


class _LocalKeys:
    """Directly on the store (no collector running, or a ClickHouse server)."""

    def __init__(self, settings: Settings) -> None:
        from agentwatch_platform.collector.auth.keys import KeyRing
        from agentwatch_platform.collector.storage import open_store

        self._store = open_store(settings)
        self._ring = KeyRing(self._store)

    def create(self, project: str, name: str, scopes: tuple[str, ...]) -> dict[str, Any]:
        from agentwatch_platform.collector.engines.registry import audit

        new = self._ring.create(project, name=name, scopes=scopes)
        audit(self._store, project, "cli", "key.create", new.info.key_id, {"name": name, "scopes": list(scopes)})
        return {**new.info.as_dict(), "key": new.key}

    def revoke(self, key_id: str) -> dict[str, Any]:
        from agentwatch_platform.collector.engines.registry import audit

        info = self._ring.revoke(key_id)
        audit(self._store, info.project, "cli", "key.revoke", key_id, {})
        return info.as_dict()

    def list(self) -> list[dict[str, Any]]:
        return [k.as_dict() for k in self._ring.list()]

    def close(self) -> None:
        self._store.close()


def _open_keys(args: argparse.Namespace) -> _Keys:
    from agentwatch_platform.collector.auth.keys import KeyAdminError
    from agentwatch_platform.collector.storage.base import StoreError

    settings = Settings.from_env(data_dir=args.data_dir)
    running = None if settings.clickhouse_url else running_collector(Path(settings.data_dir))
    if running is not None:
        return _RemoteKeys(running.url, running.admin_token)
    if not settings.clickhouse_url:
        _check_data_dir(Path(settings.data_dir), may_create=args.func is keys_create)
    try:
        return _LocalKeys(settings)
    except (StoreError, KeyAdminError, OSError) as exc:
        raise SystemExit(f"agentwatch keys: cannot open the store in {settings.data_dir} ({exc})") from None


def _check_data_dir(data_dir: Path, *, may_create: bool) -> None:
    """A data dir that cannot hold a store, or (except for ``create``) holds none, is a typo to
    name, not a store to create empty."""
    if data_dir.exists() and not data_dir.is_dir():
        raise SystemExit(f"agentwatch keys: --data-dir {data_dir} is not a directory")
    if not may_create and not (data_dir / "chdb").is_dir():
        raise SystemExit(
            f"agentwatch keys: no collector data in {data_dir} (pass the collector's --data-dir, "
            "e.g. .agentwatch/demo for the demo)"
        )


def _run(args: argparse.Namespace, action: Any) -> Any:
    from agentwatch_platform.collector.auth.keys import KeyAdminError

    keys = _open_keys(args)
    try:
        return action(keys)
    except KeyAdminError as exc:
        raise SystemExit(f"agentwatch keys: {exc}") from None
    finally:
        keys.close()


def keys_create(args: argparse.Namespace) -> int:
    from agentwatch_platform.collector.auth.scopes import ScopeError, parse_scopes

    try:
        scopes = parse_scopes(args.scope)
    except ScopeError as exc:
        raise SystemExit(f"agentwatch keys: --scope: {exc}") from None
    created = _run(args, lambda k: k.create(args.project, args.name, scopes))
    print(
        f"Created API key {created['key_id']} for project {created['project']!r} with scopes {','.join(created.get('scopes', scopes))}."
    )
    print("Store it now: it is shown only this once (only a salted hash is kept).")
    print(created["key"])
    return 0


def keys_revoke(args: argparse.Namespace) -> int:
    info = _run(args, lambda k: k.revoke(args.key_id))
    print(f"Revoked API key {info['key_id']} of project {info['project']!r}.")
    return 0


def keys_list(args: argparse.Namespace) -> int:
    keys = _run(args, lambda k: k.list())
    if args.json:
        json.dump(keys, sys.stdout, indent=2)
        print()
        return 0
    print(f"{'KEY ID':<14}{'PROJECT':<20}{'SCOPES':<28}{'CREATED':<22}{'STATE':<30}NAME")
    for k in keys:
        state = "active" if k["revoked_at"] is None else f"revoked {_when(k['revoked_at'])}"
        scopes = ",".join(k.get("scopes", ())) + (" (legacy)" if k.get("legacy") else "")
        print(f"{k['key_id']:<14}{k['project']:<20}{scopes:<28}{_when(k['created_at']):<22}{state:<30}{k['name']}")
    return 0


def _when(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S")
