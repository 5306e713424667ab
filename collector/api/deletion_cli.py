"""``agentwatch delete``: delete a trace, a user's or a session's runs, a time range, a whole project.

While a collector owns the embedded data directory the command asks it (``POST /api/admin/delete``
with the admin token from the data directory, through the one typed client); otherwise it opens
the store itself, replays any deletion a crash interrupted, and deletes. Either way the deletion is
journalled first and audited (``collector.storage.deletion``).
"""

from __future__ import annotations

import argparse
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentwatch_api.client import ApiError, CollectorClient, CollectorError
from agentwatch_api.handshake import running_collector
from agentwatch_platform.collector.query.reprice import parse_since
from agentwatch_platform.collector.settings import Settings
from agentwatch_platform.collector.storage.base import StoreError

if TYPE_CHECKING:
    from agentwatch_platform.collector.storage.deletion import Scope


def register_delete(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "delete",
        help="delete stored data: a trace, a user's or a session's runs, a time range, a whole project",
        description="Deletes whole runs (traces) with their spans, rollups, captured texts, feedback "
        "and search hits; totals drop by exactly what is deleted. Recorded in the audit log.",
    )
    p.add_argument("--project", required=True)
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--trace", metavar="TRACE_ID", help="one run")
    what.add_argument("--user", metavar="USER_ID", help="every run with a span of this user id")
    what.add_argument("--session", metavar="SESSION_ID", help="every run with a span of this session id")
    what.add_argument("--since", help="every run with a span from then (7d, 12h, RFC 3339, epoch s); see --until")
    what.add_argument("--everything", action="store_true", help="all data of the project (keys and audit log stay)")
    p.add_argument("--until", default=None, help="with --since: the end of the range (default now)")
    p.add_argument("--yes", action="store_true", help="really delete (without it, nothing is done)")
    p.add_argument("--data-dir", type=Path, default=None, help="the collector's data dir (default .agentwatch)")
    p.set_defaults(func=delete_command)


def delete_command(args: argparse.Namespace) -> int:
    request = _request(args)
    if not args.yes:
        raise SystemExit(f"agentwatch delete: this deletes {_describe(request)} for good; add --yes to do it")
    # the storage side loads pyarrow, which the collector's command must be first to load (its allocator)
    from agentwatch_platform.collector.storage.deletion import DeletionError

    settings = Settings.from_env(data_dir=args.data_dir)
    try:
        result = _remote_or_local(settings, request)
    except (StoreError, CollectorError, DeletionError) as exc:
        raise SystemExit(f"agentwatch delete: {exc}") from None
    print(
        f"Deleted {result['target']} of project {result['project']!r}: {result['traces']} runs, "
        f"{result['spans']} spans, {result['cost_usd']:.6f} USD, {result['texts_removed']} captured texts "
        f"(deletion {result['id']}, in the audit log)."
    )
    return 0


def _request(args: argparse.Namespace) -> dict[str, Any]:
    """The client's keyword arguments for what ``args`` names."""
    request: dict[str, Any] = {"project": args.project}
    if args.everything:
        request["everything"] = True
    elif args.since is not None:
        try:
            request["start"] = parse_since(args.since)
            request["end"] = parse_since(args.until) if args.until else None
        except ValueError as exc:
            raise SystemExit(f"agentwatch delete: {exc}") from None
        if request["end"] is None:
            import time

            request["end"] = time.time()
    else:
        for flag, name in (("trace", "trace_id"), ("user", "user_id"), ("session", "session_id")):
            if getattr(args, flag) is not None:
                request[name] = getattr(args, flag)
    return request


def _describe(request: dict[str, Any]) -> str:
    if request.get("everything"):
        return f"every run, span, text, feedback and alert of project {request['project']!r}"
    for name in ("trace_id", "user_id", "session_id"):
        if name in request:
            return f"the runs of {name.removesuffix('_id')} {request[name]!r} in project {request['project']!r}"
    return f"the runs of project {request['project']!r} with a span in the given time range"


def _scope(request: dict[str, Any]) -> Scope:
    from agentwatch_platform.collector.storage.deletion import Scope

    project = request["project"]
    if request.get("everything"):
        return Scope(project, "project")
    if "start" in request:
        return Scope(project, "range", start=request["start"], end=request["end"])
    kind = next(name for name in ("trace_id", "user_id", "session_id") if name in request)
    return Scope(project, kind.removesuffix("_id"), request[kind])


def _remote_or_local(settings: Settings, request: dict[str, Any]) -> dict[str, Any]:
    running = None if settings.clickhouse_url else running_collector(Path(settings.data_dir))
    if running is not None:
        with CollectorClient(running.url, running.admin_token, timeout_s=600) as client:
            try:
                return client.delete_data(**request)
            except ApiError as exc:
                raise SystemExit(f"agentwatch delete: the collector answered {exc.status}: {exc.detail}") from None
    from agentwatch_platform.collector.storage import open_store

    if not settings.clickhouse_url and not (Path(settings.data_dir) / "chdb").is_dir():
        raise SystemExit(
            f"agentwatch delete: no collector data in {settings.data_dir} (pass the collector's --data-dir)"
        )
    scope = _scope(request)
    store = open_store(settings)
    try:
        from agentwatch_platform.collector.storage.deletion import delete_data, journal_for, replay

        journal = journal_for(settings.data_dir)
        replay(store, journal)
        result = asdict(delete_data(store, scope, actor="cli", journal=journal))
    finally:
        store.close()
    result.pop("trace_ids")
    return result
