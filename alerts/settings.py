"""The alerts' settings, brought into the collector by the alerts plugin (``alerts.plugin``).

Read like the collector's own (``collector.settings.EnvSettings``: argument, then
``AGENTWATCH_*``, then default; a bad value stops the start), and listed beside them in the
README's configuration table. ``agentwatch alerts run`` outside the collector takes its rules
from ``--rules`` (default ``AGENTWATCH_ALERT_RULES``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agentwatch_platform.collector.settings import EnvSettings


@dataclass
class AlertsSettings(EnvSettings):
    alert_rules: str = field(
        default="", metadata={"env": "ALERT_RULES", "doc": "alert rules YAML file (empty = built-in defaults)"}
    )
    alert_interval_s: float = field(
        default=30.0,
        metadata={"env": "ALERT_INTERVAL_S", "doc": "alert evaluation period; 0 disables the in-process evaluator"},
    )
