"""The records the evaluator keeps and the channels deliver: an alert, a notification, a delivery."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Literal

from pydantic import BaseModel

from agentwatch_api.schemas import AlertOut

Event = Literal["firing", "repeat", "resolved", "no_data", "test"]


@dataclass
class Alert:
    """One incident of one fingerprint (rule and scope): opened at ``started_at``, held while
    the condition holds plus the rule's hold-down, resolved once (``resolved_at``)."""

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
    peak: float | None = None
    last_breach_at: float | None = None
    no_data_since: float | None = None

    def to_out(self) -> AlertOut:
        data = asdict(self)
        data.pop("project")
        data.pop("updated_at")
        return AlertOut(**data)


@dataclass(frozen=True)
class Notification:
    """What a channel sends: the event, the alert as it stands, and when it was sent.

    Events: ``firing`` (an incident opened), ``repeat`` (still firing after the repeat
    interval), ``no_data`` (a firing incident's metric went silent; only with ``no_data:
    notify``), ``resolved``, ``test`` (``agentwatch alerts test``). ``link`` opens the
    dashboard on the incident's window and scope.
    """

    event: Event
    alert: Alert
    sent_at: float
    description: str = ""  # the rule's description, for humans
    link: str = ""

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
            "link": self.link,
            "idempotency_key": self.key(),
        }

    def key(self) -> str:
        """The same for every attempt and every restart: a receiver can drop a repeat with it."""
        at = self.alert.last_notified_at if self.event == "repeat" else None
        return f"{self.alert.alert_id}:{self.event}" + (f":{at:.3f}" if at is not None else "")

    def title(self) -> str:
        label = {"firing": "FIRING", "repeat": "STILL FIRING", "resolved": "RESOLVED", "no_data": "NO DATA", "test": "TEST"}[self.event]
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


class RunStates(BaseModel):
    """``GET /api/alerts/run-states``: a run-state figure now, per group ("" = the project)."""

    metric: str
    values: dict[str, float | None]
