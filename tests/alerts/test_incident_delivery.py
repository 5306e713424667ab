"""Per incident, per channel: exactly one firing and one resolved delivery, to a real webhook
receiver (HMAC-signed, retried after failures), a Slack-compatible hook and a real SMTP
server; across an evaluator restart nothing is sent twice, and what a stopped process left
undelivered is sent once by the next one. Spans and alert state live in a real store."""

from __future__ import annotations

from email import message_from_bytes

import pytest

from agentwatch_platform.alerts.channels import IDEMPOTENCY_HEADER, SIGNATURE_HEADER, Dispatcher, sign
from agentwatch_platform.alerts.evaluator import Evaluator
from agentwatch_platform.alerts.rules import RulesConfig
from agentwatch_platform.alerts.sources import StoreBackend
from agentwatch_platform.collector.storage.base import Store
from agentwatch_platform.collector.storage.sql import alerts as alerts_sql
from tests.alerts import incident_setup
from tests.alerts.incident_setup import SPIKE, T0, by_path, drive, rules
from tests.support.receivers import Mailbox, Receiver

pytestmark = pytest.mark.slow  # evaluators restarted mid-incident (make test runs it, make quick not)


def seed(store: Store) -> None:
    incident_setup.seed(store, spike_minutes=SPIKE, minutes=32)


def make(store: Store, config: RulesConfig) -> tuple[Evaluator, Dispatcher]:
    return incident_setup.make(config, StoreBackend(store))


def test_one_firing_and_one_resolved_per_channel_signed_and_retried(
    store: Store, receiver: Receiver, smtp_server: tuple[Mailbox, int]
) -> None:
    mailbox, port = smtp_server
    seed(store)
    receiver.fail_first = 3  # the first deliveries fail: retried
    evaluator, dispatcher = make(store, rules(receiver.url, port))
    try:
        events = drive(evaluator, range(15, 31))
        assert dispatcher.flush(15)
    finally:
        dispatcher.close()
    assert events == [("firing", 20), ("resolved", 28)]
    hooks = [r for r in receiver.requests if r.path == "/hook"]
    assert [r.json()["event"] for r in hooks] == ["firing", "resolved"]
    for request in hooks:
        assert request.headers[SIGNATURE_HEADER.lower()] == sign("s3cret", request.body)
        assert request.headers[IDEMPOTENCY_HEADER.lower()] == request.json()["idempotency_key"]
    fired, resolved = (r.json() for r in hooks)
    alert = fired["alert"]
    assert (
        alert["scope"] == {"agent": "researcher"}
        and alert["value"] > 2 * alert["baseline"]
        and alert["threshold"] is not None
    )
    assert alert["started_at"] == T0 + 20 * 60 + 5
    assert (
        fired["link"].startswith(f"http://dash.example:8501/alerts?alert={alert['alert_id']}&project=p1&")
        and "agent=researcher" in fired["link"]
        and f"start={T0 + 19 * 60}" in fired["link"]
    )
    assert fired["runs_link"].startswith("http://dash.example:8501/run?costliest=1&project=p1&")
    assert "agent=researcher" in fired["runs_link"] and f"start={T0 + 19 * 60}" in fired["runs_link"]
    assert resolved["alert"]["alert_id"] == alert["alert_id"] and resolved["alert"]["peak"] >= alert["value"]
    assert [p["text"].split("]")[0] for p in by_path(receiver, "/slack")] == [
        "[agentwatch FIRING",
        "[agentwatch RESOLVED",
    ]
    mails = mailbox.wait_for(2)
    assert len(mails) == 2
    subjects = [message_from_bytes(content)["Subject"] for _, _, content in mails]
    assert ["FIRING" in subjects[0], "RESOLVED" in subjects[1]] == [True, True]
    body = message_from_bytes(mails[0][2]).get_payload(decode=True).decode()
    assert (
        "scope: agent=researcher" in body
        and "incident started" in body
        and "baseline" in body
        and "http://dash.example:8501/alerts?alert=" in body
        and "its most expensive run: http://dash.example:8501/run?costliest=1&" in body
    )
    rows = store.query(alerts_sql.LIST_DELIVERIES, {"project": "p1", "alert_id": alert["alert_id"], "limit": 100})
    assert sum(not r["ok"] for r in rows) == 3
    assert sorted((r["channel"], r["event"]) for r in rows if r["ok"]) == sorted(
        (c, e) for c in ("hook", "slack", "mail", "log") for e in ("firing", "resolved")
    )


def test_a_restart_mid_incident_sends_nothing_twice(
    store: Store, receiver: Receiver, smtp_server: tuple[Mailbox, int]
) -> None:
    mailbox, port = smtp_server
    seed(store)
    first, dispatcher = make(store, rules(receiver.url, port))
    try:
        assert drive(first, range(15, 22)) == [("firing", 20)]
        assert dispatcher.flush(15)
    finally:
        dispatcher.close()  # the collector stops mid-incident
    second, dispatcher = make(store, rules(receiver.url, port))
    try:
        assert drive(second, range(22, 31)) == [("resolved", 28)]
        assert dispatcher.flush(15)
    finally:
        dispatcher.close()
    assert [r["event"] for r in by_path(receiver, "/hook")] == ["firing", "resolved"]
    assert [p["text"].split("]")[0] for p in by_path(receiver, "/slack")] == [
        "[agentwatch FIRING",
        "[agentwatch RESOLVED",
    ]
    assert len(mailbox.wait_for(2)) == 2


def test_a_notification_cut_off_by_a_stop_is_sent_once_after_the_restart(
    store: Store, receiver: Receiver, smtp_server: tuple[Mailbox, int]
) -> None:
    mailbox, port = smtp_server
    seed(store)
    config = rules(receiver.url, port)
    receiver.fail_first = 10_000  # the webhook receiver is down while the incident opens
    first, dispatcher = make(store, config)
    try:
        assert drive(first, range(15, 22)) == [("firing", 20)]
        assert dispatcher.flush(15)  # every attempt failed
    finally:
        dispatcher.close()
    assert by_path(receiver, "/hook") == []
    receiver.fail_first = 0
    for _ in range(2):  # two restarts: the owed notification goes out once, on the first
        evaluator, dispatcher = make(store, config)
        try:  # two minutes: it waits out the stopped process's retry span first (alerts.redelivery)
            assert drive(evaluator, range(22, 24)) == []
            assert dispatcher.flush(15)
        finally:
            dispatcher.close()
    hooks = by_path(receiver, "/hook")
    assert [r["event"] for r in hooks] == ["firing"] and hooks[0]["alert"]["started_at"] == T0 + 20 * 60 + 5
    assert (
        len(by_path(receiver, "/slack")) == 1 and len(mailbox.wait_for(1)) == 1
    )  # delivered before the stop: not again
