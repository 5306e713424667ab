"""Notifications an earlier process recorded but never delivered, sent again once it has settled.

An evaluator that starts (a restart, or the alerts role passing to this collector) finds in the
history the incidents of the last day whose ``firing`` or ``resolved`` notification has no
successful delivery on some channel. The process that recorded it may be dead, or still alive
and retrying: a role passes when a lease runs out on a starved machine, not only when its holder
stops, and that holder's dispatcher keeps trying what it was given. Sending at once would then
notify twice. So what is owed waits, counted in this evaluator's own clock from when it was first
seen, as long as a live dispatcher may keep trying one notification (``Dispatcher.retry_span_s``)
plus ``SETTLE_MARGIN_S``; then the history is read again and only what is still undelivered goes
out, once. The old holder starts no attempt once its lease is no longer held by its own clock
(``Dispatcher(may_send=...)``): what waited in its queue, a retry or a notification behind others,
is left here. So only an attempt already under way as the role passed can overlap, and this wait
covers it; a channel that delivered but whose success was never recorded (the process died in
between) is sent again (at least once, never lost). An incident's ``firing`` never goes
out after its ``resolved``: not where that channel delivered the ``resolved``, nor once this
evaluator itself sent it (``submitted``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from agentwatch_platform.alerts.channels import Dispatcher
from agentwatch_platform.alerts.errors import AlertsError
from agentwatch_platform.alerts.model import Alert, Event
from agentwatch_platform.alerts.sources import AlertHistory

REDELIVER_WITHIN_S = 86_400  # notifications of the last day that no attempt delivered are re-sent
SETTLE_MARGIN_S = 30.0  # beyond the retry span: a queue behind, a slow store write of the last attempt

Owed = tuple[str, Event, str]  # (alert_id, event, channel)


@dataclass(frozen=True)
class Resend:
    """One notification to send again: the incident as the history holds it now, on these channels."""

    alert: Alert
    event: Event
    channels: tuple[str, ...]


class Redelivery:
    """What each project is owed, and when each owed notification may go out (``due``)."""

    def __init__(
        self, history: AlertHistory, dispatcher: Dispatcher, channels_of: Callable[[str], tuple[str, ...] | None]
    ) -> None:
        """``channels_of``: a rule's channels by its name, None for a rule no longer configured."""
        self.history, self.dispatcher, self.channels_of = history, dispatcher, channels_of
        self._waiting: dict[str, dict[Owed, float]] = {}  # project -> owed -> when it may go out
        self._unread: set[str] = set()  # projects whose owed notifications could not be read yet

    def forget(self) -> None:
        """The role was lost: whatever is owed is the next holder's to send."""
        self._waiting.clear()
        self._unread.clear()

    def submitted(self, project: str, alert_id: str, event: Event) -> None:
        """This evaluator handed a newer notification of the incident to its dispatcher: an older
        one of the same event is not sent again, nor, once it resolved, its ``firing`` (an on-call
        engineer would read the incident as open again)."""
        events = {event, "firing"} if event == "resolved" else {event}
        waiting = self._waiting.get(project, {})
        for key in [key for key in waiting if key[0] == alert_id and key[1] in events]:
            del waiting[key]

    def due(self, project: str, now: float, *, loaded: bool) -> list[Resend]:
        """What to send now. ``loaded``: the project was just read from the history, so what is
        owed is looked up and starts waiting; otherwise the history is read again only once
        something waiting is due. Raises ``AlertsError`` when the history cannot be read (what
        waits keeps waiting)."""
        waiting = self._waiting.get(project, {})
        if not (loaded or project in self._unread or any(at <= now for at in waiting.values())):
            return []
        try:
            owed = self._owed(project, now)
        except AlertsError:
            self._unread.add(project)  # looked up again next round
            raise
        self._unread.discard(project)
        for key in set(waiting) - set(owed):  # delivered, or its incident deleted, meanwhile
            del waiting[key]
        for key in owed:
            waiting.setdefault(key, now + self.dispatcher.retry_span_s(key[2]) + SETTLE_MARGIN_S)
        self._waiting[project] = waiting
        ready = {key for key, at in waiting.items() if at <= now}
        for key in ready:
            del waiting[key]
        return _grouped(owed, ready)

    def _owed(self, project: str, now: float) -> dict[Owed, Alert]:
        """Every notification of the last day without a successful delivery, on its rule's channels,
        but the ``firing`` of an incident whose ``resolved`` that channel already delivered."""
        alerts, delivered = self.history.owed(project, now - REDELIVER_WITHIN_S)
        owed: dict[Owed, Alert] = {}
        for alert in sorted(alerts, key=lambda a: a.started_at):
            channels = self.channels_of(alert.rule)
            if channels is None:  # its rule is gone: nothing to send it on
                continue
            events: tuple[Event, ...] = ("firing",) if alert.state == "firing" else ("firing", "resolved")
            for event in events:
                for channel in channels:
                    done = (alert.alert_id, event, channel) in delivered
                    if event == "firing":
                        done = done or (alert.alert_id, "resolved", channel) in delivered
                    if not done:
                        owed[(alert.alert_id, event, channel)] = alert
        return owed


def _grouped(owed: dict[Owed, Alert], ready: set[Owed]) -> list[Resend]:
    """The ready notifications, one per incident and event, in ``owed``'s order (oldest incident
    first, firing before resolved, the rule's channels in its order)."""
    channels: dict[tuple[str, Event], list[str]] = {}
    for key in owed:
        if key in ready:
            channels.setdefault(key[:2], []).append(key[2])
    return [Resend(owed[(*key, names[0])], key[1], tuple(names)) for key, names in channels.items()]
