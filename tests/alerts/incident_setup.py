"""Set-up shared by the alerts tests that drive the evaluator over a real store: two agents'
runs with a cost spike, runs whose root never comes, and an evaluator with its dispatcher over
either backend (the collector's store in process, or its HTTP API as ``alerts run`` uses)."""

from __future__ import annotations

import random
import time
from collections.abc import Collection

from agentwatch_platform.alerts.channels import Dispatcher
from agentwatch_platform.alerts.evaluator import Evaluator
from agentwatch_platform.alerts.rules import RulesConfig, parse_rules
from agentwatch_platform.alerts.sources import HttpBackend, StoreBackend
from agentwatch_platform.collector.ingest.live_runs import LiveRuns
from agentwatch_platform.collector.storage.base import Store
from agentwatch_platform.collector.storage.columns import spans_table
from agentwatch_platform.collector.storage.model import SpanRow
from tests.collector.factories import agent_run, new_span_id, new_trace_id
from tests.support.receivers import Receiver

T0 = int(time.time()) // 60 * 60 - 3600  # a recent minute boundary (old spans fall to the retention TTL)
SPIKE = (
    20,
    21,
    22,
    24,
    25,
)  # the delivery tests' six minutes of 20x spend, one ordinary minute (23) inside: one incident


def seed(store: Store, *, spike_minutes: Collection[int], minutes: int = 30) -> None:
    """Two agents, three runs a minute each; 'researcher' spends 20x in ``spike_minutes``."""
    rng = random.Random(5)
    rows = []
    for minute in range(minutes):
        for agent in ("researcher", "writer"):
            spike = agent == "researcher" and minute in spike_minutes
            for k in range(3):
                cost = rng.uniform(0.008, 0.012) * (20 if spike else 1)
                rows += agent_run(
                    project="p1", agent=agent, start_s=T0 + minute * 60 + k * 15, steps=1, cost_per_call=cost
                )
    store.insert_spans(rows)


def make(config: RulesConfig, backend: StoreBackend | HttpBackend) -> tuple[Evaluator, Dispatcher]:
    """A fresh evaluator process, as after a restart: state only from the backend's history."""
    dispatcher = Dispatcher(config.channels, record=backend.record, policy=config.delivery)
    return Evaluator(config, backend, backend, dispatcher), dispatcher


def rules(hook_url: str, smtp_port: int) -> RulesConfig:
    """The delivery tests' rule: per agent, on a webhook, a Slack hook, e-mail and the log."""
    return parse_rules(f"""
dashboard_url: http://dash.example:8501/
delivery: {{attempts: 4, backoff: 50ms, max_backoff: 100ms}}
channels:
  hook: {{type: webhook, url: "{hook_url}", secret: s3cret}}
  slack: {{type: slack, url: "{hook_url.replace("/hook", "/slack")}"}}
  mail: {{type: email, host: 127.0.0.1, port: {smtp_port}, from: agentwatch@example.com, to: [oncall@example.com]}}
rules:
  - name: spend
    metric: cost_usd
    scope: {{agent: "*"}}
    window: 1m
    condition: {{kind: anomaly, transform: log, z: 5, z_resolve: 2, min_ratio: 2, history: 30m, season: 0, min_history: 10}}
    severity: critical
    channels: [hook, slack, mail, log]
    resolve_after: 2
    repeat_interval: 0
""")


def drive(evaluator: Evaluator, minutes: range) -> list[tuple[str, int]]:
    """Six evaluations a minute, as the collector's schedule does."""
    out = []
    for minute in minutes:
        for tenth in range(6):
            out += [(event, minute) for event, _ in evaluator.run_once(now=T0 + minute * 60 + 5 + tenth * 10)]
    return out


def by_path(receiver: Receiver, path: str) -> list[dict]:
    return [r.json() for r in receiver.requests if r.path == path]


def ingest(store: Store, rows: list[SpanRow]) -> None:
    """Store spans as the collector's writer does: rows, then the opening heads of rootless runs."""
    table = spans_table(rows)
    store.insert_spans(table)
    LiveRuns().after_insert(store, table)


def rootless(agent: str, start_s: float, step_offsets_s: range, *, project: str = "p1") -> list[SpanRow]:
    """A run whose root never arrives: one step span at each offset (a live agent sends steps)."""
    trace_id, run_id = new_trace_id(), new_span_id()
    return [
        SpanRow(
            project=project,
            trace_id=trace_id,
            agent_name=agent,
            service_name="svc",
            span_id=new_span_id(),
            parent_span_id=run_id,
            name=f"step {i}",
            kind="step",
            start_time_ns=int((start_s + at) * 1e9),
            end_time_ns=int((start_s + at + 1) * 1e9),
            step_index=i,
        )
        for i, at in enumerate(step_offsets_s)
    ]


def webhook_rules(url: str, secret: str, *, severity: str = "warning") -> str:
    """Rules text: the per-agent spend rule of the HTTP tests, on one signed webhook."""
    return f"""
channels:
  hook: {{type: webhook, url: "{url}", secret: {secret}}}
rules:
  - name: spend
    metric: cost_usd
    scope: {{agent: "*"}}
    window: 1m
    condition: {{kind: anomaly, transform: log, z: 5, z_resolve: 2, min_ratio: 2, history: 30m, season: 0, min_history: 10}}
    severity: {severity}
    channels: [hook]
"""
