"""``GET /api/ingest`` is scoped like every query endpoint: a project's key learns its own span
counts and the collector's health, never how many spans another project sent, stored or had
rejected; the collector-wide counters answer only the admin token."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tests.collector.ingest_helpers import agent_trace, otlp_request
from tests.reliability.helpers import PROTOBUF, InProcess, in_process

ALPHA, BETA = "alpha", "beta"
SPAN_COUNTERS = ("received_spans", "stored_spans", "rejected_spans")


def _send(collector: InProcess, project: str, traces: int) -> None:
    for _ in range(traces):  # 4 spans each
        body = agent_trace(os.urandom(16)).SerializeToString()
        assert collector.post_traces(body, project, PROTOBUF).status_code == 200


def _send_one_bad_span(collector: InProcess, project: str) -> None:
    """A span with an 8-byte trace id: rejected in partial_success, counted by the collector."""
    body = otlp_request(os.urandom(8), [{"span_id": os.urandom(8), "name": "bad"}]).SerializeToString()
    response = collector.post_traces(body, project, PROTOBUF)
    assert response.status_code == 200, response.text


def _status(collector: InProcess, headers: dict[str, str]) -> dict[str, Any]:
    response = collector.client.get("/api/ingest", headers=headers)
    assert response.status_code == 200, response.text
    return response.json()


def test_a_project_key_never_learns_another_projects_span_counts(tmp_path: Path) -> None:
    with in_process(tmp_path / "data", rate_limit_spans_per_s=0.0) as collector:
        _send(collector, ALPHA, 1)
        _send(collector, BETA, 5)
        collector.drain()
        alpha = _status(collector, collector.auth(ALPHA))
        assert alpha["scope"] == "project"
        assert {name: alpha[name] for name in SPAN_COUNTERS} == {
            "received_spans": 4,
            "stored_spans": 4,
            "rejected_spans": 0,
        }
        assert _status(collector, collector.auth(BETA))["stored_spans"] == 20

        _send(collector, BETA, 7)  # beta keeps sending, some of it bad: nothing of it shows to alpha
        _send_one_bad_span(collector, BETA)
        collector.drain()
        again = _status(collector, collector.auth(ALPHA))
        assert {name: again[name] for name in SPAN_COUNTERS} == {name: alpha[name] for name in SPAN_COUNTERS}
        beta = _status(collector, collector.auth(BETA))
        assert {name: beta[name] for name in SPAN_COUNTERS} == {
            "received_spans": 49,
            "stored_spans": 48,
            "rejected_spans": 1,
        }

        operator = _status(collector, {"Authorization": f"Bearer {collector.app.state.admin_token}"})
        assert operator["scope"] == "collector"
        assert operator["stored_spans"] == 52 and operator["received_spans"] == 53 and operator["rejected_spans"] == 1


def test_ingest_status_needs_a_key_or_the_admin_token(tmp_path: Path) -> None:
    with in_process(tmp_path / "data") as collector:
        assert collector.client.get("/api/ingest").status_code == 401
        assert collector.client.get("/api/ingest", headers={"Authorization": "Bearer aw_nope_nope"}).status_code == 401
