"""A notification one evaluator recorded and had not yet delivered when the alerts role passed
is sent by the next holder only once the first can no longer be trying it: never while the first
still delivers it, once when the first died with it (``alerts.redelivery``). Real store, real
dispatchers; the channel is a gate the test opens, so nothing depends on a thread's timing."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest

from agentwatch_platform.alerts.channels import DeliveryError, Dispatcher
from agentwatch_platform.alerts.errors import SourceError
from agentwatch_platform.alerts.evaluator import Evaluator
from agentwatch_platform.alerts.model import Alert, Event, Notification
from agentwatch_platform.alerts.redelivery import SETTLE_MARGIN_S
from agentwatch_platform.alerts.rules import RulesConfig, parse_rules
from agentwatch_platform.alerts.sources import StoreBackend
from agentwatch_platform.collector.storage.base import Store
from agentwatch_platform.collector.storage.sql import alerts as alerts_sql
from tests.alerts import incident_setup
from tests.alerts.incident_setup import SPIKE, drive

CONFIG = """
delivery: {attempts: 2, backoff: 50ms, max_backoff: 100ms}
channels:
  hook: {type: webhook, url: "http://127.0.0.1:9/hook"}
rules:
  - name: spend
    metric: cost_usd
    scope: {agent: "*"}
    window: 1m
    condition: {kind: anomaly, transform: log, z: 5, z_resolve: 2, min_ratio: 2, history: 30m, season: 0, min_history: 10}
    channels: [hook]
"""


class GatedChannel:
    """A channel whose every send waits until the test opens its gate: a delivery in flight."""

    type: ClassVar[str] = "gated"
    timeout_s = 10.0  # what a webhook's send may take: part of the dispatcher's retry span

    def __init__(self, *, open_: bool) -> None:
        self.gate, self.entered = threading.Event(), threading.Event()
        self.sent: list[tuple[Event, str]] = []
        if open_:
            self.gate.set()

    def send(self, notification: Notification) -> None:
        self.entered.set()
        if not self.gate.wait(120):
            raise DeliveryError("the test never opened the gate")
        self.sent.append((notification.event, notification.alert.alert_id))


class FiringLost:
    """A channel that fails every ``firing`` and delivers every ``resolved``: the incident's start
    never got through there, its end did."""

    type: ClassVar[str] = "firing-lost"
    timeout_s = 10.0

    def __init__(self) -> None:
        self.sent: list[tuple[Event, str]] = []

    def send(self, notification: Notification) -> None:
        if notification.event == "firing":
            raise DeliveryError("HTTP 503")
        self.sent.append((notification.event, notification.alert.alert_id))


class FailingOnce(StoreBackend):
    """The store's history, whose first read of what is owed fails (a store busy at start)."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.failures = 1

    def owed(self, project: str, since: float) -> tuple[list[Alert], set[tuple[str, str, str]]]:
        if self.failures:
            self.failures -= 1
            raise SourceError("the store is busy")
        return super().owed(project, since)


class Holder:
    """One collector's evaluator and dispatcher, its role held while ``held`` (asked before each
    attempt too, as the collector's dispatcher asks its lease)."""

    def __init__(self, store: Store, config: RulesConfig, channel: Any, backend: StoreBackend | None = None) -> None:
        backend = backend or StoreBackend(store)
        self.held, self.channel = True, channel
        self.dispatcher = Dispatcher(
            {"hook": channel}, record=backend.record, policy=config.delivery, may_send=lambda: self.held
        )
        self.evaluator = Evaluator(config, backend, backend, self.dispatcher, role_held=lambda: self.held)


@pytest.fixture
def holders(store: Store) -> Iterator[tuple[Holder, Holder]]:
    incident_setup.seed(store, spike_minutes=SPIKE, minutes=32)
    config = parse_rules(CONFIG)
    first, second = Holder(store, config, GatedChannel(open_=False)), Holder(store, config, GatedChannel(open_=True))
    yield first, second
    first.channel.gate.set()
    for holder in (first, second):
        holder.dispatcher.close()


def _fire_and_lose_the_role(first: Holder) -> str:
    """The first holder opens the incident at minute 20; its delivery hangs; its lease runs out."""
    assert drive(first.evaluator, range(18, 21)) == [("firing", 20)]
    assert first.channel.entered.wait(60)  # the attempt is in flight, nothing recorded yet
    first.held = False
    return first.evaluator.history.firing("p1")[0].alert_id


def test_the_next_holder_does_not_resend_what_the_previous_one_still_delivers(
    store: Store, holders: tuple[Holder, Holder]
) -> None:
    first, second = holders
    alert_id = _fire_and_lose_the_role(first)
    settle_s = second.dispatcher.retry_span_s("hook") + SETTLE_MARGIN_S
    assert 30 < settle_s < 60  # two attempts of up to 10 s, 50 ms between them, the margin

    drive(second.evaluator, range(21, 22))  # takes the role: the firing notification is owed, and waits
    assert second.dispatcher.flush(30) and second.channel.sent == []
    first.channel.gate.set()  # the first holder's attempt goes through and is recorded
    assert first.dispatcher.flush(30)
    drive(second.evaluator, range(22, 24))  # past the wait: delivered meanwhile, so nothing to send
    assert second.dispatcher.flush(30)

    assert first.channel.sent == [("firing", alert_id)] and second.channel.sent == []
    deliveries = store.query(alerts_sql.LIST_DELIVERIES, {"project": "p1", "alert_id": alert_id, "limit": 10})
    assert [(d["event"], d["ok"]) for d in deliveries] == [("firing", True)]


def test_what_a_dead_holder_left_undelivered_is_sent_once_when_it_has_settled(
    store: Store, holders: tuple[Holder, Holder]
) -> None:
    first, second = holders
    alert_id = _fire_and_lose_the_role(first)
    first.dispatcher.close(timeout=0.1)  # the process dies with the attempt in flight

    drive(second.evaluator, range(21, 22))  # owed, waiting: within the first holder's retry span
    assert second.dispatcher.flush(30) and second.channel.sent == []
    drive(second.evaluator, range(22, 25))  # settled: sent once, then delivered
    assert second.dispatcher.flush(30)

    assert second.channel.sent == [("firing", alert_id)]
    first.channel.gate.set()  # the dead process's thread ends without recording (it was closed)
    deliveries = store.query(alerts_sql.LIST_DELIVERIES, {"project": "p1", "alert_id": alert_id, "limit": 10})
    assert [(d["event"], d["ok"]) for d in deliveries] == [("firing", True)]


def test_a_firing_never_goes_out_after_its_resolved(store: Store) -> None:
    """The hook lost the incident's firing and delivered its resolved: the next evaluator sends
    the hook nothing (a firing now would read as the incident open again)."""
    incident_setup.seed(store, spike_minutes=SPIKE, minutes=32)
    config = parse_rules(CONFIG)
    first = Holder(store, config, FiringLost())
    try:
        events = drive(first.evaluator, range(18, 31))
        assert first.dispatcher.flush(30)
    finally:
        first.dispatcher.close()
    assert [event for event, _ in events] == ["firing", "resolved"]
    assert [event for event, _ in first.channel.sent] == ["resolved"]
    second = Holder(store, config, GatedChannel(open_=True))
    try:
        drive(second.evaluator, range(31, 34))  # well past the wait
        assert second.dispatcher.flush(30)
    finally:
        second.dispatcher.close()
    assert second.channel.sent == []


def test_what_is_owed_is_looked_up_again_when_the_first_look_fails(store: Store) -> None:
    incident_setup.seed(store, spike_minutes=SPIKE, minutes=32)
    config = parse_rules(CONFIG)
    first = Holder(store, config, GatedChannel(open_=False))
    second = Holder(store, config, GatedChannel(open_=True), backend=FailingOnce(store))
    try:
        alert_id = _fire_and_lose_the_role(first)
        first.dispatcher.close(timeout=0.1)  # dies with the attempt in flight
        drive(second.evaluator, range(21, 24))  # the first look fails; the next round's does not
        assert second.dispatcher.flush(30)
        assert second.evaluator.errors == 1 and second.channel.sent == [("firing", alert_id)]
    finally:
        first.channel.gate.set()
        for holder in (first, second):
            holder.dispatcher.close()


def test_a_resolved_sent_here_drops_the_firing_that_waits(store: Store, holders: tuple[Holder, Holder]) -> None:
    """The new holder resolves the incident while the dead holder's firing still waits, and its
    resolved is in flight when that wait ends: the firing is not sent after it."""
    first, second = holders
    alert_id = _fire_and_lose_the_role(first)
    first.dispatcher.close(timeout=0.1)  # dies with the firing in flight
    second.channel.gate.clear()  # the new holder's deliveries hang too, until the test opens them
    assert drive(second.evaluator, range(27, 28)) == [("resolved", 27)]  # loads, the firing waits, resolves
    drive(second.evaluator, range(28, 30))  # past the firing's wait, the resolved still in flight
    second.channel.gate.set()
    assert second.dispatcher.flush(30)
    assert second.channel.sent == [("resolved", alert_id)]


class LeaseRunsOut:
    """A channel whose first attempt fails as the holder's lease runs out (a starved machine):
    the retry waits in the holder's queue, as a notification behind others would."""

    type: ClassVar[str] = "lease-runs-out"
    timeout_s = 10.0

    def __init__(self) -> None:
        self.holder: Holder | None = None
        self.sent: list[tuple[Event, str]] = []

    def send(self, notification: Notification) -> None:
        if not self.sent and self.holder is not None and self.holder.held:
            self.holder.held = False
            raise DeliveryError("HTTP 503")
        self.sent.append((notification.event, notification.alert.alert_id))


def test_what_waits_in_the_old_holders_queue_is_sent_by_the_next_holder_only(store: Store) -> None:
    incident_setup.seed(store, spike_minutes=SPIKE, minutes=32)
    config = parse_rules(CONFIG)
    channel = LeaseRunsOut()
    first, second = Holder(store, config, channel), Holder(store, config, GatedChannel(open_=True))
    channel.holder = first
    try:
        assert drive(first.evaluator, range(18, 21)) == [("firing", 20)]
        assert first.dispatcher.flush(30)  # the failed attempt, then its retry left to the next holder
        assert channel.sent == [] and first.dispatcher.passed_on == 1
        drive(second.evaluator, range(21, 25))  # takes the role, waits out the first's retry span, sends
        assert second.dispatcher.flush(30)
    finally:
        for holder in (first, second):
            holder.dispatcher.close()
    alert_id = second.evaluator.history.firing("p1")[0].alert_id
    assert second.channel.sent == [("firing", alert_id)] and channel.sent == []
    deliveries = store.query(alerts_sql.LIST_DELIVERIES, {"project": "p1", "alert_id": alert_id, "limit": 10})
    assert sorted((d["event"], d["ok"]) for d in deliveries) == [("firing", False), ("firing", True)]


def test_a_holder_that_takes_the_role_back_goes_on_from_the_history(
    store: Store, holders: tuple[Holder, Holder]
) -> None:
    """Between the first holder's two terms the second resolved the incident: the first, back,
    does not resolve it again (nor notify it a second time)."""
    first, second = holders
    first.channel.gate.set()
    assert drive(first.evaluator, range(18, 21)) == [("firing", 20)]
    first.held = False
    assert first.evaluator.run_once(now=incident_setup.T0 + 20 * 60 + 56) == []  # a tick without the role
    assert drive(second.evaluator, range(21, 31)) == [("resolved", 27)]
    second.held, first.held = False, True
    assert drive(first.evaluator, range(31, 33)) == []
    for holder in (first, second):
        assert holder.dispatcher.flush(30)
    assert [e for e, _ in first.channel.sent] == ["firing"] and [e for e, _ in second.channel.sent] == ["resolved"]
