"""The evaluator on a real chDB store through ``collector.query``: fire once, repeat after the
cool-down, resolve once, survive a restart, record deliveries (a failing channel included)."""

from __future__ import annotations

from agentwatch_platform.alerts.channels import SIGNATURE_HEADER, Dispatcher, sign
from agentwatch_platform.alerts.evaluator import Evaluator
from agentwatch_platform.alerts.rules import RulesConfig, parse_rules
from agentwatch_platform.alerts.sources import StoreBackend
from agentwatch_platform.collector.storage.base import Store
from agentwatch_platform.collector.storage.sql import alerts as alerts_sql
from tests.alerts import incident_setup
from tests.alerts.incident_setup import T0
from tests.collector.factories import agent_run
from tests.support.ports import free_port
from tests.support.receivers import Receiver

SPIKE_MINUTE = 20


def rules(hook_url: str, *, cooldown: str = "5m", extra_channel: str = "") -> RulesConfig:
    text = f"""
delivery: {{attempts: 2, backoff: 50ms, max_backoff: 100ms}}
channels:
  hook: {{type: webhook, url: "{hook_url}", secret: "${{HOOK_SECRET}}"}}
  {extra_channel}
rules:
  - name: spend
    metric: cost_usd
    scope: {{agent: "*"}}
    window: 1m
    condition: {{kind: anomaly, transform: log, z: 5, z_resolve: 2, min_ratio: 2, history: 30m, season: 0, min_history: 10}}
    severity: critical
    channels: [hook{", bad" if extra_channel else ""}]
    cooldown: {cooldown}
  - name: steps
    metric: max_steps
    window: 1m
    condition: {{kind: threshold, threshold: 40}}
"""
    return parse_rules(text, env={"HOOK_SECRET": "s3cret"})


def seed(store: Store, *, spike_minutes: range = range(SPIKE_MINUTE, SPIKE_MINUTE + 1)) -> None:
    """Two agents, three runs a minute each; 'researcher' spends 20x in the spike minutes."""
    incident_setup.seed(store, spike_minutes=spike_minutes, minutes=30)


def make(store: Store, config: RulesConfig) -> tuple[Evaluator, Dispatcher]:
    return incident_setup.make(config, StoreBackend(store))


def drive(evaluator: Evaluator, minutes: range) -> list[tuple[str, float, str]]:
    """Evaluate in the middle of each minute; (event, minute, alert_id) of every notification."""
    out = []
    for minute in minutes:
        for event, alert in evaluator.run_once(now=T0 + minute * 60 + 30):
            out.append((event, minute, alert.alert_id))
    return out


def test_spike_fires_once_and_resolves_once(store: Store, receiver: Receiver) -> None:
    seed(store)
    evaluator, dispatcher = make(store, rules(receiver.url))
    try:
        events = drive(evaluator, range(12, 28))
        assert dispatcher.flush(10)
    finally:
        dispatcher.close()
    assert [(e, m) for e, m, _ in events] == [("firing", SPIKE_MINUTE), ("resolved", SPIKE_MINUTE + 2)]
    requests = receiver.wait_for(2)
    assert len(requests) == 2
    for request in requests:
        assert request.headers[SIGNATURE_HEADER.lower()] == sign("s3cret", request.body)
    fired, resolved = (r.json() for r in requests)
    assert fired["event"] == "firing" and fired["alert"]["scope"] == {"agent": "researcher"}
    assert fired["alert"]["value"] > 2 * fired["alert"]["baseline"] and fired["alert"]["threshold"] is not None
    assert resolved["event"] == "resolved" and resolved["alert"]["alert_id"] == fired["alert"]["alert_id"]
    stored = store.query(
        alerts_sql.LIST_ALERTS,
        {"project": "p1", "alert_id": "", "state": "", "start_ms": 0, "end_ms": 4_000_000_000_000, "limit": 10},
    )
    assert [(a["state"], a["started_at"], a["resolved_at"]) for a in stored] == [
        ("resolved", T0 + SPIKE_MINUTE * 60 + 30, T0 + (SPIKE_MINUTE + 2) * 60 + 30)
    ]
    assert store.query(alerts_sql.FIRING_ALERTS, {"project": "p1"}) == []


def test_still_firing_repeats_only_after_cooldown(store: Store, receiver: Receiver) -> None:
    seed(store, spike_minutes=range(SPIKE_MINUTE, SPIKE_MINUTE + 8))
    evaluator, dispatcher = make(store, rules(receiver.url, cooldown="3m"))
    try:
        events = drive(evaluator, range(SPIKE_MINUTE - 1, 31))
    finally:
        dispatcher.close()
    assert [(e, m) for e, m, _ in events] == [("firing", 20), ("repeat", 23), ("repeat", 26), ("resolved", 29)]
    assert len({alert_id for _, _, alert_id in events}) == 1


def test_restart_reloads_firing_alerts_without_renotifying(store: Store, receiver: Receiver) -> None:
    seed(store)
    first, dispatcher = make(store, rules(receiver.url))
    try:
        [(event, _, alert_id)] = drive(first, range(SPIKE_MINUTE - 1, SPIKE_MINUTE + 1))
        assert event == "firing"
        second, dispatcher2 = make(store, rules(receiver.url))  # a restarted evaluator
        try:
            assert drive(second, range(SPIKE_MINUTE + 1, SPIKE_MINUTE + 2)) == []
            assert drive(second, range(SPIKE_MINUTE + 2, SPIKE_MINUTE + 3)) == [
                ("resolved", SPIKE_MINUTE + 2, alert_id)
            ]
        finally:
            dispatcher2.close()
    finally:
        dispatcher.close()


def test_failing_channel_is_retried_and_recorded_while_webhook_delivers(store: Store, receiver: Receiver) -> None:
    seed(store)
    bad = f'bad: {{type: slack, url: "http://127.0.0.1:{free_port()}/down", timeout: 1s}}'
    evaluator, dispatcher = make(store, rules(receiver.url, extra_channel=bad))
    try:
        [(event, _, alert_id)] = drive(evaluator, range(SPIKE_MINUTE - 1, SPIKE_MINUTE + 1))
        assert dispatcher.flush(10)
    finally:
        dispatcher.close()
    assert len(receiver.wait_for(1)) == 1
    rows = store.query(alerts_sql.LIST_DELIVERIES, {"project": "p1", "alert_id": alert_id, "limit": 10})
    assert sorted((r["channel"], r["attempt"], r["ok"]) for r in rows) == [
        ("bad", 1, False),
        ("bad", 2, False),
        ("hook", 1, True),
    ]
    assert all("ConnectError" in r["error"] for r in rows if r["channel"] == "bad")


def test_unreadable_metric_changes_nothing(store: Store, receiver: Receiver) -> None:
    seed(store)
    evaluator, dispatcher = make(store, rules(receiver.url))
    try:
        drive(evaluator, range(SPIKE_MINUTE - 1, SPIKE_MINUTE + 1))
        store.close()  # the store goes away: no resolution, no crash, errors counted
        assert evaluator.run_once(now=T0 + (SPIKE_MINUTE + 3) * 60) == []
        assert evaluator.errors >= 1
    finally:
        dispatcher.close()


def test_alert_of_a_removed_rule_resolves_quietly(store: Store, receiver: Receiver) -> None:
    seed(store)
    evaluator, dispatcher = make(store, rules(receiver.url))
    try:
        [(event, _, alert_id)] = drive(evaluator, range(SPIKE_MINUTE - 1, SPIKE_MINUTE + 1))
    finally:
        dispatcher.close()
    config = rules(receiver.url)
    without_spend = RulesConfig(tuple(r for r in config.rules if r.name != "spend"), config.channels, config.delivery)
    evaluator, dispatcher = make(store, without_spend)
    try:
        assert (
            drive(evaluator, range(SPIKE_MINUTE + 1, SPIKE_MINUTE + 2)) == []
        )  # no notification: its channels are gone
    finally:
        dispatcher.close()
    stored = store.query(
        alerts_sql.LIST_ALERTS,
        {"project": "p1", "alert_id": "", "state": "", "start_ms": 0, "end_ms": 4_000_000_000_000, "limit": 10},
    )
    assert [(a["alert_id"], a["state"]) for a in stored] == [(alert_id, "resolved")]
    assert "no longer configured" in stored[0]["message"]


def test_buckets_the_collector_calls_partial_are_not_judged_complete() -> None:
    from agentwatch_api.schemas import SeriesPoint, TimeSeries
    from agentwatch_platform.alerts.evaluator import _settled

    def series(partial_from: int) -> TimeSeries:
        points = [SeriesPoint(t=60.0 * i, group="", value=1.0, partial=i >= partial_from) for i in range(6)]
        return TimeSeries(metric="cost_usd", unit="usd", step_s=60, group_by="none", points=points)

    assert _settled(series(5), 0.0, 60, 5) == 5  # only the bucket now filling: all five before it complete
    assert _settled(series(4), 0.0, 60, 5) == 4  # the bucket just ended by the clock is still filling
    assert _settled(series(9), 0.0, 60, 5) == 5  # never more than the clock allows


def test_a_rule_shorter_than_the_arrival_lag_judges_the_newest_complete_bucket(
    store: Store, receiver: Receiver
) -> None:
    """The collector's watermark trails now by its arrival lag (150 s here: runs whose spans come
    minutes after they start), longer than these rules' 1-minute window: each judges the newest
    bucket the watermark calls complete, that much later, instead of no bucket at all."""
    seed(store)  # minutes 0-29: 6 runs a minute, 'researcher' spending 20x in minute 20
    store.insert_spans(agent_run(project="p1", agent="writer", start_s=T0 + 30 * 60, steps=1))  # 30: 1 run
    config = parse_rules(f"""
channels:
  hook: {{type: webhook, url: "{receiver.url}"}}
rules:
  - name: quiet
    metric: runs
    window: 1m
    condition: {{kind: threshold, threshold: 2, direction: below}}
    channels: [hook]
  - name: pricey
    metric: cost_usd
    scope: {{agent: "*"}}
    window: 1m
    condition: {{kind: threshold, threshold: 0.3}}
    channels: [hook]
""")
    evaluator, dispatcher = incident_setup.make(config, StoreBackend(store, lag=lambda: 150.0))
    try:
        events = [(e, m) for e, m, _ in drive(evaluator, range(15, 36))]
    finally:
        dispatcher.close()
    # At minute m + 30 s the watermark is m - 2 minutes: minute m - 3 is the newest complete one,
    # m - 2 is judged as the partial one where a sum can only grow (cost above).
    assert events == [("firing", 22), ("resolved", 24), ("firing", 33)]
    by_rule = {(a["rule"], a["state"]) for a in store.query(alerts_sql.LIST_ALERTS, _ALL_ALERTS)}
    assert by_rule == {("pricey", "resolved"), ("quiet", "firing")}


def test_a_below_rule_on_runs_fires_once_the_agents_stop(store: Store, receiver: Receiver) -> None:
    """An empty bucket of an agent seen in the day before is a zero to judge, not "no data": a
    ``runs`` below 1 rule fires once a whole window passes without a run (per agent and for the
    project), and never for an agent it has not seen."""
    seed(store)  # minutes 0-29: 3 runs a minute of each of two agents; none from 30 on
    config = parse_rules(f"""
channels:
  hook: {{type: webhook, url: "{receiver.url}"}}
rules:
  - name: stopped
    metric: runs
    window: 1m
    condition: {{kind: threshold, threshold: 1, direction: below}}
    channels: [hook]
  - name: agent-stopped
    metric: runs
    scope: {{agent: "*"}}
    window: 1m
    condition: {{kind: threshold, threshold: 1, direction: below}}
    channels: [hook]
  - name: never-seen
    metric: runs
    scope: {{agent: "planner"}}
    window: 1m
    condition: {{kind: threshold, threshold: 1, direction: below}}
    channels: [hook]
""")
    evaluator, dispatcher = incident_setup.make(config, StoreBackend(store))
    try:
        events = [(e, m) for e, m, _ in drive(evaluator, range(25, 34))]
    finally:
        dispatcher.close()
    assert events == [("firing", 31)] * 3  # minute 30, the first without a run, once it ended
    alerts = store.query(alerts_sql.LIST_ALERTS, _ALL_ALERTS)
    assert sorted((a["rule"], a["scope"].get("agent", "")) for a in alerts) == [
        ("agent-stopped", "researcher"),
        ("agent-stopped", "writer"),
        ("stopped", ""),
    ]


_ALL_ALERTS = {"project": "p1", "alert_id": "", "state": "", "start_ms": 0, "end_ms": 4_000_000_000_000, "limit": 10}


def test_a_round_that_outlasts_its_role_records_and_sends_nothing(store: Store, receiver: Receiver) -> None:
    """Two collectors' evaluators, the role passing between them: the one whose lease ran out
    mid-round leaves the incident to the holder, which notifies it once; given the role back, the
    first reads the holder's record and sends nothing again (what the holder still delivers is
    not sent twice either: test_redelivery)."""
    seed(store)
    held = {"first": True}
    first, dispatcher = make(store, rules(receiver.url))
    first.role_held = lambda: held["first"]
    second, dispatcher2 = make(store, rules(receiver.url))
    try:
        assert drive(first, range(SPIKE_MINUTE - 2, SPIKE_MINUTE)) == []
        held["first"] = False  # its lease ran out while the round evaluated the spike
        assert drive(first, range(SPIKE_MINUTE, SPIKE_MINUTE + 1)) == []
        assert store.query(alerts_sql.FIRING_ALERTS, {"project": "p1"}) == []
        [(event, _, alert_id)] = drive(second, range(SPIKE_MINUTE, SPIKE_MINUTE + 1))  # the new holder
        assert event == "firing"
        assert dispatcher2.flush(10)  # the holder delivered it and recorded the delivery
        held["first"] = True  # the role comes back
        assert drive(first, range(SPIKE_MINUTE + 1, SPIKE_MINUTE + 2)) == []
        assert drive(first, range(SPIKE_MINUTE + 2, SPIKE_MINUTE + 3)) == [("resolved", SPIKE_MINUTE + 2, alert_id)]
        assert dispatcher.flush(10) and dispatcher2.flush(10)
    finally:
        dispatcher.close()
        dispatcher2.close()
    assert [r.json()["event"] for r in receiver.wait_for(2)] == ["firing", "resolved"]
