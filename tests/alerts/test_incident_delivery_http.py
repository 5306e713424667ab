"""``agentwatch alerts run`` as its own process keeps the collector's promise across restarts:
per incident and channel one firing and one resolved delivery (a real webhook receiver,
HMAC-signed and retried; a Slack-compatible hook; a real SMTP server), nothing sent twice
by a restarted evaluator, and what a stopped one left undelivered sent once by the next.
Its alert history and delivery records live in a real collector, read and written over HTTP."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentwatch_platform.alerts.channels import SIGNATURE_HEADER, sign
from agentwatch_platform.alerts.sources import HttpBackend
from tests.alerts import incident_setup
from tests.alerts.incident_setup import SPIKE, by_path, drive, rules
from tests.collector.ingest_helpers import serve, settings_for
from tests.support import local_http
from tests.support.receivers import Mailbox, Receiver

pytestmark = pytest.mark.slow  # evaluator processes restarted (make test runs it, make quick not)


def restart(url: str, key: str, config: object, minutes: range) -> list[tuple[str, int]]:
    """One evaluator process: start from the collector's history, drive ``minutes``, stop."""
    backend = HttpBackend(url, [key])
    evaluator, dispatcher = incident_setup.make(config, backend)  # type: ignore[arg-type]
    try:
        events = drive(evaluator, minutes)
        assert dispatcher.flush(15)
    finally:
        dispatcher.close()
        backend.close()
    return events


def test_restarts_of_the_out_of_process_evaluator_neither_duplicate_nor_lose(
    tmp_path: Path, receiver: Receiver, smtp_server: tuple[Mailbox, int]
) -> None:
    mailbox, port = smtp_server
    config = rules(receiver.url, port)
    with serve(settings_for(tmp_path / "data")) as collector:  # in-process alerts off
        incident_setup.seed(collector.app.state.store.get(), spike_minutes=SPIKE, minutes=32)
        key = collector.key("p1", ["read", "admin"])
        receiver.fail_first = 10_000  # the hooks are down while the incident opens: every attempt fails
        assert restart(collector.url, key, config, range(15, 22)) == [("firing", 20)]
        assert by_path(receiver, "/hook") == [] and len(mailbox.wait_for(1)) == 1
        receiver.fail_first = 2  # back, after two more failures: retried
        assert restart(collector.url, key, config, range(22, 26)) == []  # owes the hooks' firing: sent once
        assert restart(collector.url, key, config, range(26, 31)) == [("resolved", 28)]
        assert restart(collector.url, key, config, range(31, 32)) == []  # owes nothing
        deliveries = local_http.get(
            f"{collector.url}/api/alerts/deliveries", params={"limit": 1000}, headers={"Authorization": f"Bearer {key}"}
        ).json()
    hooks = [r for r in receiver.requests if r.path == "/hook"]
    assert [r.json()["event"] for r in hooks] == ["firing", "resolved"]
    assert all(r.headers[SIGNATURE_HEADER.lower()] == sign("s3cret", r.body) for r in hooks)
    assert hooks[0].json()["alert"]["alert_id"] == hooks[1].json()["alert"]["alert_id"]
    assert [p["text"].split("]")[0] for p in by_path(receiver, "/slack")] == [
        "[agentwatch FIRING",
        "[agentwatch RESOLVED",
    ]
    assert len(mailbox.wait_for(2)) == 2
    ok = sorted((d["channel"], d["event"]) for d in deliveries if d["ok"])
    assert ok == sorted((c, e) for c in ("hook", "slack", "mail", "log") for e in ("firing", "resolved"))
    assert sum(not d["ok"] for d in deliveries) >= 4 * 2 + 2  # two channels' four attempts, then two more failures
