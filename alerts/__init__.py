"""agentwatch alerts: rules over the query layer, a scheduled evaluator, reliable delivery.

- ``alerts.rules``: the YAML rules file (``load_rules``), with errors naming line and key.
- ``alerts.detectors``: static thresholds and a robust seasonal anomaly detector.
- ``alerts.evaluator``: fingerprints, the firing/resolved state machine, cool-downs.
- ``alerts.channels``: webhook (HMAC-signed), Slack, e-mail, log; retried in the background.
- ``alerts.sources``: where metrics come from (in-process store or the collector's HTTP API).
- ``alerts.api`` / ``alerts.cli``: the ``/api/alerts`` router and ``agentwatch alerts``.
"""

from __future__ import annotations

from agentwatch_platform.alerts.errors import AlertsError, DeliveryError, RulesError, SourceError

__all__ = ["AlertsError", "DeliveryError", "RulesError", "SourceError"]
