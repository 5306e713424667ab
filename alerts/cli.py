"""``agentwatch alerts run|test|check``: the evaluator as its own process, a test message, a linter.

``run`` evaluates against a running collector's query API (it never opens the store: chDB
allows one process per data directory); it needs one project key per project to watch
(``--key``, repeatable, or ``AGENTWATCH_API_KEY``) with the ``read`` and ``admin`` scopes
(``agentwatch keys create --scope read,admin``), and it writes alert history back through
``POST /api/alerts``. Run one evaluator per project: when ``alerts run`` watches a project,
start that collector with ``AGENTWATCH_ALERT_INTERVAL_S=0`` so that its in-process evaluator
(with possibly other rules) does not notify twice or resolve this one's alerts.
Exit codes: 0 ok, 1 delivery or connection failure, 2 invalid rules file or arguments.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time

from agentwatch_platform.alerts.channels import Dispatcher
from agentwatch_platform.alerts.errors import AlertsError, DeliveryError, RulesError
from agentwatch_platform.alerts.evaluator import Evaluator
from agentwatch_platform.alerts.model import Alert, Notification
from agentwatch_platform.alerts.rules import RulesConfig, load_rules
from agentwatch_platform.alerts.sources import HttpBackend

DEFAULT_URL = "http://127.0.0.1:4318"


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("alerts", help="alert rules: run the evaluator, send a test, check a rules file")
    commands = parser.add_subparsers(dest="alerts_command", metavar="ACTION", required=True)

    run = commands.add_parser("run", help="evaluate the rules on a schedule against a collector's query API")
    run.add_argument(
        "--url",
        default=os.environ.get("AGENTWATCH_COLLECTOR_URL", DEFAULT_URL),
        help="collector base URL (AGENTWATCH_COLLECTOR_URL)",
    )
    run.add_argument(
        "--key",
        action="append",
        default=[],
        help="project API key with the read and admin scopes; repeat for several projects (AGENTWATCH_API_KEY)",
    )
    run.add_argument(
        "--rules",
        default=os.environ.get("AGENTWATCH_ALERT_RULES", ""),
        help="rules YAML (AGENTWATCH_ALERT_RULES; default: built-in rules)",
    )
    run.add_argument("--interval", type=float, default=30.0, help="seconds between evaluation rounds (default 30)")
    run.add_argument("--once", action="store_true", help="one round, wait for deliveries, exit")
    run.set_defaults(func=cmd_run)

    test = commands.add_parser("test", help="send a test notification on one channel")
    test.add_argument("--channel", required=True, help="channel name from the rules file ('log' always exists)")
    test.add_argument(
        "--rules", default=os.environ.get("AGENTWATCH_ALERT_RULES", ""), help="rules YAML with the channel"
    )
    test.set_defaults(func=cmd_test)

    check = commands.add_parser("check", help="validate a rules file (errors name the line and key)")
    check.add_argument("file", help="rules YAML")
    check.set_defaults(func=cmd_check)


def _load(path: str) -> RulesConfig | None:
    try:
        return load_rules(path or None)
    except RulesError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return None


def cmd_check(args: argparse.Namespace) -> int:
    config = _load(args.file)
    if config is None:
        return 2
    print(f"{args.file}: OK, {len(config.rules)} rules, channels: {', '.join(sorted(config.channels))}")
    return 0


def cmd_test(args: argparse.Namespace) -> int:
    config = _load(args.rules)
    if config is None:
        return 2
    channel = config.channels.get(args.channel)
    if channel is None:
        print(f"error: no channel {args.channel!r}; defined: {', '.join(sorted(config.channels))}", file=sys.stderr)
        return 2
    try:
        channel.send(test_notification(time.time()))
    except DeliveryError as exc:
        print(f"error: test notification on {args.channel} failed: {exc}", file=sys.stderr)
        return 1
    print(f"test notification sent on {args.channel} ({channel.type})")
    return 0


def test_notification(now: float) -> Notification:
    """A harmless, clearly labelled notification for checking a channel end to end."""
    alert = Alert(
        project="test",
        alert_id="test",
        fingerprint="test",
        rule="agentwatch-test",
        severity="info",
        state="firing",
        scope={},
        metric="none",
        value=None,
        baseline=None,
        threshold=None,
        message="agentwatch test notification: this channel works.",
        started_at=now,
        last_notified_at=now,
        updated_at=now,
    )
    return Notification("test", alert, now, "Sent by 'agentwatch alerts test'.")


def cmd_run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    keys = args.key or [k for k in [os.environ.get("AGENTWATCH_API_KEY", "")] if k]
    if not keys:
        print("error: no project key: pass --key KEY (repeatable) or set AGENTWATCH_API_KEY", file=sys.stderr)
        return 2
    config = _load(args.rules)
    if config is None:
        return 2
    backend = HttpBackend(args.url, keys)
    dispatcher = Dispatcher(config.channels, record=backend.record, policy=config.delivery)
    evaluator = Evaluator(config, backend, backend, dispatcher)
    try:
        return _loop(evaluator, dispatcher, args.interval, once=args.once)
    finally:
        dispatcher.close()
        backend.close()


def _loop(evaluator: Evaluator, dispatcher: Dispatcher, interval: float, *, once: bool) -> int:
    while True:
        errors = evaluator.errors
        try:
            evaluator.run_once()
        except AlertsError as exc:
            logging.getLogger("agentwatch.alerts").error("evaluation round failed: %s", exc)
        if once:
            dispatcher.flush(timeout=60.0)
            return 1 if evaluator.errors > errors else 0
        time.sleep(interval)
