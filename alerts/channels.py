"""Delivery channels and the background dispatcher that retries them.

A channel is a small frozen dataclass built from the ``channels:`` section of the rules file;
``send`` delivers one notification or raises ``DeliveryError`` (never anything else). The
``Dispatcher`` gives each channel its own worker thread and bounded queue, so a slow or
failing channel neither blocks the evaluator (``submit`` never waits) nor delays the others;
failed attempts are retried with exponential backoff and every attempt is recorded.
"""

from __future__ import annotations

import hashlib
import heapq
import hmac
import itertools
import json
import logging
import smtplib
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from email.message import EmailMessage
from typing import ClassVar, Protocol

import httpx

from agentwatch_platform.alerts.errors import DeliveryError
from agentwatch_platform.alerts.model import Delivery, Notification
from agentwatch_platform.alerts.wording import details

log = logging.getLogger("agentwatch.alerts")

SIGNATURE_HEADER = "X-Agentwatch-Signature"
EVENT_HEADER = "X-Agentwatch-Event"
IDEMPOTENCY_HEADER = "Idempotency-Key"  # the same on every retry and after a restart
_USER_AGENT = "agentwatch-alerts/1"


class Channel(Protocol):
    """Delivers a notification; must raise only ``DeliveryError`` and must bound its own time."""

    type: ClassVar[str]

    def send(self, notification: Notification) -> None: ...


def sign(secret: str, body: bytes) -> str:
    """The signature header value: ``sha256=`` + hex HMAC-SHA256 of the raw body."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def _post_json(url: str, body: bytes, headers: dict[str, str], timeout_s: float) -> None:
    try:
        response = httpx.post(
            url,
            content=body,
            headers={"Content-Type": "application/json", "User-Agent": _USER_AGENT, **headers},
            timeout=timeout_s,
        )
    except httpx.HTTPError as exc:
        raise DeliveryError(f"{type(exc).__name__}: {exc}") from exc
    if response.status_code >= 300:
        raise DeliveryError(f"HTTP {response.status_code}: {response.text[:200]}")


@dataclass(frozen=True)
class WebhookChannel:
    """Generic JSON webhook; with a secret, the body is signed (``X-Agentwatch-Signature``)."""

    url: str
    secret: str = ""
    timeout_s: float = 10.0
    headers: dict[str, str] = field(default_factory=dict)
    type: ClassVar[str] = "webhook"

    def send(self, notification: Notification) -> None:
        body = json.dumps(notification.payload(), sort_keys=True, separators=(",", ":")).encode()
        headers = {EVENT_HEADER: notification.event, IDEMPOTENCY_HEADER: notification.key(), **self.headers}
        if self.secret:
            headers[SIGNATURE_HEADER] = sign(self.secret, body)
        _post_json(self.url, body, headers, self.timeout_s)


@dataclass(frozen=True)
class SlackChannel:
    """A Slack (or Mattermost, Rocket.Chat) incoming webhook: ``text`` plus one mrkdwn block."""

    url: str
    timeout_s: float = 10.0
    type: ClassVar[str] = "slack"

    def send(self, notification: Notification) -> None:
        text = notification.title()
        payload = {
            "text": text,
            "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": f"*{text}*\n{details(notification)}"}}],
        }
        _post_json(self.url, json.dumps(payload).encode(), {}, self.timeout_s)


@dataclass(frozen=True)
class EmailChannel:
    """E-mail over SMTP; STARTTLS (``starttls``), implicit TLS (``ssl``) and login optional."""

    host: str
    to: tuple[str, ...]
    sender: str = field(default="agentwatch@localhost", metadata={"key": "from"})
    port: int = 25
    user: str = ""
    password: str = ""
    starttls: bool = False
    ssl: bool = False
    verify_tls: bool = True
    timeout_s: float = 10.0
    type: ClassVar[str] = "email"

    def send(self, notification: Notification) -> None:
        message = EmailMessage()
        message["Subject"] = notification.title()
        message["From"] = self.sender
        message["To"] = ", ".join(self.to)
        message.set_content(details(notification))
        try:
            with self._connect() as smtp:
                if self.user:
                    smtp.login(self.user, self.password)
                smtp.send_message(message)
        except (smtplib.SMTPException, OSError) as exc:
            raise DeliveryError(f"SMTP {self.host}:{self.port}: {type(exc).__name__}: {exc}") from exc

    def _connect(self) -> smtplib.SMTP:
        context = ssl.create_default_context()
        if not self.verify_tls:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if self.ssl:
            return smtplib.SMTP_SSL(self.host, self.port, timeout=self.timeout_s, context=context)
        smtp = smtplib.SMTP(self.host, self.port, timeout=self.timeout_s)
        if self.starttls:
            smtp.starttls(context=context)
        return smtp


@dataclass(frozen=True)
class LogChannel:
    """The collector's (or evaluator's) log, logger ``agentwatch.alerts``; never fails."""

    level: str = "warning"
    type: ClassVar[str] = "log"

    def __post_init__(self) -> None:
        if self.level.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
            raise ValueError(f"level must be debug, info, warning, error or critical, not {self.level!r}")

    def send(self, notification: Notification) -> None:
        link = notification.runs_link or notification.link
        log.log(
            logging.getLevelName(self.level.upper()),
            "%s: %s%s",
            notification.title(),
            notification.alert.message,
            f" · costliest run: {link}" if notification.runs_link else (f" · {link}" if link else ""),
        )


CHANNEL_TYPES: dict[str, type] = {c.type: c for c in (WebhookChannel, SlackChannel, EmailChannel, LogChannel)}


@dataclass(frozen=True)
class DeliveryPolicy:
    """How hard to try: ``attempts`` in all, waiting ``backoff`` then doubling up to ``max_backoff``."""

    attempts: int = 5
    backoff_s: float = 2.0
    max_backoff_s: float = 300.0
    max_queue: int = 1000

    def __post_init__(self) -> None:
        if self.attempts < 1 or self.backoff_s < 0 or self.max_backoff_s < self.backoff_s or self.max_queue < 1:
            raise ValueError("need attempts >= 1, 0 <= backoff <= max_backoff and max_queue >= 1")

    def delay(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        return min(self.max_backoff_s, self.backoff_s * 2 ** (attempt - 1))


Recorder = Callable[[Delivery], None]


class _Worker:
    """One channel's thread: a due-time heap of (notification, attempt); bounded."""

    def __init__(
        self,
        name: str,
        channel: Channel,
        policy: DeliveryPolicy,
        record: Recorder,
        clock: Callable[[], float],
        may_send: Callable[[], bool],
    ) -> None:
        self.name, self.channel, self.policy, self.record, self.clock = name, channel, policy, record, clock
        self.may_send = may_send
        self._heap: list[tuple[float, int, Notification, int]] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._busy = False
        self._stopping = False
        self._closed = False  # after stop's join: the history's store may be closed now
        self.dropped = 0
        self.passed_on = 0  # notifications left to the next holder of the alerts role
        self._thread = threading.Thread(target=self._loop, name=f"agentwatch-alerts-{name}", daemon=True)
        self._thread.start()

    def put(self, notification: Notification) -> bool:
        with self._cond:
            if len(self._heap) >= self.policy.max_queue or self._stopping:
                self.dropped += 1
                return False
            heapq.heappush(self._heap, (time.monotonic(), next(self._seq), notification, 1))
            self._cond.notify()
            return True

    def idle(self) -> bool:
        with self._cond:
            return not self._heap and not self._busy

    def stop(self, timeout: float) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify()
        self._thread.join(timeout)
        self._closed = True

    def _next(self) -> tuple[Notification, int] | None:
        with self._cond:
            while not self._stopping:
                if self._heap and self._heap[0][0] <= time.monotonic():
                    _, _, notification, attempt = heapq.heappop(self._heap)
                    self._busy = True
                    return notification, attempt
                self._cond.wait(self._heap[0][0] - time.monotonic() if self._heap else None)
            return None

    def _loop(self) -> None:
        while (job := self._next()) is not None:
            try:
                self._attempt(*job)
            finally:
                with self._cond:
                    self._busy = False

    def _attempt(self, notification: Notification, attempt: int) -> None:
        if not self.may_send():
            self.passed_on += 1
            log.info(
                "alert channel %s: the alerts role passed; its next holder sends the %s notification of %s",
                self.name,
                notification.event,
                notification.alert.rule,
            )
            return
        error = ""
        try:
            self.channel.send(notification)
        except DeliveryError as exc:
            error = str(exc) or type(exc).__name__
        except Exception as exc:  # a channel bug must not kill the worker
            log.exception("alert channel %s crashed", self.name)
            error = f"internal error: {type(exc).__name__}: {exc}"
        alert = notification.alert
        self._record(
            Delivery(
                alert.project, alert.alert_id, self.name, attempt, not error, error, self.clock(), notification.event
            )
        )
        if error and attempt < self.policy.attempts:
            log.warning(
                "alert delivery on %s failed (attempt %d/%d), retrying: %s",
                self.name,
                attempt,
                self.policy.attempts,
                error,
            )
            with self._cond:
                heapq.heappush(
                    self._heap,
                    (time.monotonic() + self.policy.delay(attempt), next(self._seq), notification, attempt + 1),
                )
        elif error:
            log.error("alert delivery on %s gave up after %d attempts: %s", self.name, attempt, error)

    def _record(self, delivery: Delivery) -> None:
        if self._closed:  # after close the history's store may be closed: do not reopen it
            log.warning(
                "alert delivery on %s finished during shutdown, not recorded: ok=%s %s",
                self.name,
                delivery.ok,
                delivery.error,
            )
            return
        try:
            self.record(delivery)
        except Exception:
            log.exception("could not record alert delivery on %s", self.name)


class Dispatcher:
    """Delivers notifications in the background: one worker per channel, retries, records.

    ``submit`` never blocks: a full queue drops the notification, logs it and counts it in
    ``dropped``. ``close`` is safe to call twice and bounded in time.

    ``may_send`` is asked before every attempt (no store round trip: the collector's lease by this
    process's clock): once this collector no longer holds the alerts role, what waits in its queues
    (a retry, or a notification behind others) is not sent but left to the next holder, which sends
    what no attempt delivered (``alerts.redelivery``). Only an attempt under way as the role passed
    can overlap the next holder's, and the next holder waits that long (``retry_span_s``).
    """

    def __init__(
        self,
        channels: dict[str, Channel],
        *,
        record: Recorder,
        policy: DeliveryPolicy | None = None,
        clock: Callable[[], float] = time.time,
        may_send: Callable[[], bool] = lambda: True,
    ) -> None:
        self.policy = policy or DeliveryPolicy()
        self._workers = {
            name: _Worker(name, channel, self.policy, record, clock, may_send) for name, channel in channels.items()
        }

    @property
    def dropped(self) -> int:
        return sum(w.dropped for w in self._workers.values())

    @property
    def passed_on(self) -> int:
        return sum(w.passed_on for w in self._workers.values())

    def submit(self, notification: Notification, channels: tuple[str, ...] | list[str]) -> None:
        for name in channels:
            worker = self._workers.get(name)
            if worker is None:
                log.error("alert %s names unknown channel %r", notification.alert.rule, name)
            elif not worker.put(notification):
                log.error(
                    "alert channel %s queue full or closed: dropped %s notification of %s",
                    name,
                    notification.event,
                    notification.alert.rule,
                )

    def retry_span_s(self, channel: str) -> float:
        """How long this dispatcher may keep trying one notification on ``channel`` once a worker
        takes it up: every attempt's timeout and every wait between attempts."""
        worker = self._workers.get(channel)
        if worker is None:
            return 0.0
        waits = sum(self.policy.delay(attempt) for attempt in range(1, self.policy.attempts))
        return waits + self.policy.attempts * float(getattr(worker.channel, "timeout_s", 0.0))

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every queue is empty (retries included); True if it got there in time."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(w.idle() for w in self._workers.values()):
                return True
            time.sleep(0.02)
        return False

    def close(self, timeout: float = 5.0) -> None:
        for worker in self._workers.values():
            worker.stop(timeout / max(len(self._workers), 1))
