"""The records the evaluator keeps and the channels deliver: an alert, a notification, a delivery."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Literal

from collector.api.schemas import AlertOut

Event = Literal["firing", "repeat", "resolved", "test"]


@dataclass
class Alert:
    """One episode of one fingerprint: fired at ``started_at``, maybe resolved later."""

    project: str
    alert_id: str
    fingerprint: str
    rule: str
    severity: str
    state: Literal["firing", "resolved"]
    scope: dict[str, str]
    metric: str
    value: float | None
    baseline: float | None
    threshold: float | None
    message: str
    started_at: float
    resolved_at: float | None = None
    last_notified_at: float | None = None
    updated_at: float = 0.0

    def to_out(self) -> AlertOut:
        data = asdict(self)
        data.pop("project")
        data.pop("updated_at")
        return AlertOut(**data)


@dataclass(frozen=True)
class Notification:
    """What a channel sends: the event, the alert as it stands, and when it was sent.

    Events: ``firing`` (new alert), ``repeat`` (still firing after the cool-down),
    ``resolved``, ``test`` (``agentwatch alerts test``).
    """

    event: Event
    alert: Alert
    sent_at: float
    description: str = ""  # the rule's description, for humans

    def payload(self) -> dict[str, object]:
        """The generic JSON body (webhook); stable field names, epoch-second times."""
        return {
            "source": "agentwatch",
            "version": 1,
            "event": self.event,
            "sent_at": self.sent_at,
            "project": self.alert.project,
            "alert": self.alert.to_out().model_dump(),
            "description": self.description,
        }

    def title(self) -> str:
        label = {"firing": "FIRING", "repeat": "STILL FIRING", "resolved": "RESOLVED", "test": "TEST"}[self.event]
        scope = ", ".join(f"{k}={v}" for k, v in sorted(self.alert.scope.items()))
        return f"[agentwatch {label}] {self.alert.severity}: {self.alert.rule} ({self.alert.project}{', ' + scope if scope else ''})"


@dataclass(frozen=True)
class Delivery:
    """One attempt to deliver one notification on one channel (a row of ``alert_deliveries``)."""

    project: str
    alert_id: str
    channel: str
    attempt: int
    ok: bool
    error: str
    at: float
    event: str = field(default="", compare=False)
