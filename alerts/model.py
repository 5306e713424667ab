"""The records the evaluator keeps and the channels deliver: an alert, a notification, a delivery."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from agentwatch_api.schemas import AlertOut

Event = Literal["firing", "repeat", "resolved", "no_data", "test"]


class Alert(AlertOut):
    """One incident of one fingerprint (rule and scope): opened at ``started_at``, held while
    the condition holds plus the rule's hold-down, resolved once (``resolved_at``).

    The wire's ``AlertOut`` plus what the evaluator keeps about it: the project it belongs to
    and when it last changed (the ``alerts`` table's version). Mutable: the evaluator updates
    an open incident in place (assignment is not validated)."""

    project: str
    updated_at: float = 0.0

    def to_out(self) -> AlertOut:
        return AlertOut(**self.model_dump(exclude={"project", "updated_at"}))


@dataclass(frozen=True)
class Notification:
    """What a channel sends: the event, the alert as it stands, and when it was sent.

    Events: ``firing`` (an incident opened), ``repeat`` (still firing after the repeat
    interval), ``no_data`` (a firing incident's metric went silent; only with ``no_data:
    notify``), ``resolved``, ``test`` (``agentwatch alerts test``). ``link`` opens the
    dashboard on the incident's window and scope, ``runs_link`` on its most expensive run.
    """

    event: Event
    alert: Alert
    sent_at: float
    description: str = ""  # the rule's description, for humans
    link: str = ""
    runs_link: str = ""

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
            "runs_link": self.runs_link,
            "idempotency_key": self.key(),
        }

    def key(self) -> str:
        """The same for every attempt and every restart: a receiver can drop a repeat with it."""
        at = self.alert.last_notified_at if self.event == "repeat" else None
        return f"{self.alert.alert_id}:{self.event}" + (f":{at:.3f}" if at is not None else "")

    def title(self) -> str:
        label = {
            "firing": "FIRING",
            "repeat": "STILL FIRING",
            "resolved": "RESOLVED",
            "no_data": "NO DATA",
            "test": "TEST",
        }[self.event]
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
