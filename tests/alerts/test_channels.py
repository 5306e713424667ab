"""Channels against real local servers, and the dispatcher's retries and records."""

from __future__ import annotations

import email
import email.policy
import ssl
import subprocess
import threading
import time
from pathlib import Path

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult

from agentwatch_platform.alerts.channels import (
    SIGNATURE_HEADER,
    DeliveryPolicy,
    Dispatcher,
    EmailChannel,
    LogChannel,
    SlackChannel,
    WebhookChannel,
    sign,
)
from agentwatch_platform.alerts.errors import DeliveryError
from agentwatch_platform.alerts.model import Alert, Delivery, Notification
from tests.support.poll import wait_until
from tests.support.ports import free_port
from tests.support.receivers import Mailbox, Receiver


def notification(event: str = "firing") -> Notification:
    alert = Alert(
        project="proj",
        alert_id="a1",
        fingerprint="fp1",
        rule="cost-per-hour-spike",
        severity="critical",
        state="firing",
        scope={"agent": "researcher"},
        metric="cost_usd",
        value=41.2,
        baseline=6.1,
        threshold=15.8,
        message="cost-per-hour-spike [agent=researcher]: cost_usd = 41.2",
        started_at=1_800_000_000.0,
        last_notified_at=1_800_000_000.0,
    )
    return Notification(event, alert, 1_800_000_000.0, "cost per hour spiked")  # type: ignore[arg-type]


def test_webhook_body_is_json_and_signed(receiver: Receiver) -> None:
    WebhookChannel(url=receiver.url, secret="k3y").send(notification())
    [request] = receiver.wait_for(1)
    assert request.headers[SIGNATURE_HEADER.lower()] == sign("k3y", request.body)
    assert request.headers["x-agentwatch-event"] == "firing"
    body = request.json()
    assert body["event"] == "firing" and body["project"] == "proj"
    assert body["alert"]["rule"] == "cost-per-hour-spike" and body["alert"]["scope"] == {"agent": "researcher"}
    assert body["alert"]["value"] == 41.2 and body["alert"]["state"] == "firing"


def test_webhook_error_status_is_a_delivery_error(receiver: Receiver) -> None:
    receiver.fail_first = 1
    with pytest.raises(DeliveryError, match="HTTP 500"):
        WebhookChannel(url=receiver.url).send(notification())


def test_webhook_unreachable_is_a_delivery_error() -> None:
    with pytest.raises(DeliveryError, match="ConnectError"):
        WebhookChannel(url=f"http://127.0.0.1:{free_port()}/", timeout_s=2).send(notification())


def test_slack_payload_has_text_and_block(receiver: Receiver) -> None:
    SlackChannel(url=receiver.url).send(notification("resolved"))
    body = receiver.wait_for(1)[0].json()
    assert body["text"].startswith("[agentwatch RESOLVED] critical: cost-per-hour-spike (proj, agent=researcher)")
    assert body["blocks"][0]["type"] == "section" and "cost_usd = 41.2" in body["blocks"][0]["text"]["text"]


def test_email_plain_smtp(smtp_server: tuple[Mailbox, int]) -> None:
    mailbox, port = smtp_server
    EmailChannel(host="127.0.0.1", port=port, to=("oncall@example.com",), sender="aw@example.com").send(notification())
    [(sender, rcpts, content)] = mailbox.wait_for(1)
    message = email.message_from_bytes(content, policy=email.policy.default)
    assert sender == "aw@example.com" and rcpts == ["oncall@example.com"]
    assert message["Subject"].strip().startswith("[agentwatch FIRING]") and "cost_usd = 41.2" in message.get_content()


def _self_signed(tmp_path: Path) -> ssl.SSLContext:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    return context


def test_email_starttls_and_login(tmp_path: Path) -> None:
    mailbox, port = Mailbox(), free_port()

    def authenticator(
        server: object, session: object, envelope: object, mechanism: str, auth_data: object
    ) -> AuthResult:
        ok = getattr(auth_data, "login", b"") == b"alice" and getattr(auth_data, "password", b"") == b"pw"
        return AuthResult(success=ok)

    controller = Controller(
        mailbox,
        hostname="127.0.0.1",
        port=port,
        tls_context=_self_signed(tmp_path),
        require_starttls=True,
        authenticator=authenticator,
        auth_require_tls=True,
    )
    controller.start()
    try:
        channel = EmailChannel(
            host="127.0.0.1",
            port=port,
            to=("x@example.com",),
            starttls=True,
            verify_tls=False,
            user="alice",
            password="pw",
        )
        channel.send(notification())
        assert len(mailbox.wait_for(1)) == 1
        with pytest.raises(DeliveryError, match="SMTP"):
            EmailChannel(
                host="127.0.0.1",
                port=port,
                to=("x@example.com",),
                starttls=True,
                verify_tls=False,
                user="alice",
                password="wrong",
                timeout_s=1,
            ).send(notification())
        with pytest.raises(DeliveryError, match="SMTP"):  # the server insists on STARTTLS
            EmailChannel(host="127.0.0.1", port=port, to=("x@example.com",)).send(notification())
    finally:
        controller.stop()
    assert len(mailbox.messages) == 1


def test_log_channel_logs(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="agentwatch.alerts"):
        LogChannel().send(notification())
    assert "cost_usd = 41.2" in caplog.text


class SlowChannel:
    """A channel that hangs for a while: other channels must not wait for it."""

    type = "slow"

    def __init__(self) -> None:
        self.release = threading.Event()

    def send(self, notification: Notification) -> None:
        self.release.wait(10)


def test_failing_channel_is_retried_and_recorded_while_others_deliver(receiver: Receiver) -> None:
    deliveries: list[Delivery] = []
    slow = SlowChannel()
    channels = {
        "good": WebhookChannel(url=receiver.url),
        "bad": WebhookChannel(url=f"http://127.0.0.1:{free_port()}/", timeout_s=1),
        "slow": slow,
    }
    dispatcher = Dispatcher(
        channels, record=deliveries.append, policy=DeliveryPolicy(attempts=3, backoff_s=0.05, max_backoff_s=0.2)
    )
    try:
        started = time.monotonic()
        dispatcher.submit(notification(), ["good", "bad", "slow"])
        assert time.monotonic() - started < 0.5  # submit never waits on a channel
        assert len(receiver.wait_for(1, timeout=5)) == 1  # delivered while 'slow' still hangs
        slow.release.set()
        assert dispatcher.flush(timeout=10)
    finally:
        dispatcher.close()
    bad = [d for d in deliveries if d.channel == "bad"]
    assert [d.attempt for d in bad] == [1, 2, 3] and not any(d.ok for d in bad) and "ConnectError" in bad[0].error
    assert [(d.attempt, d.ok) for d in deliveries if d.channel == "good"] == [(1, True)]
    assert [(d.attempt, d.ok) for d in deliveries if d.channel == "slow"] == [(1, True)]
    assert all(d.alert_id == "a1" and d.project == "proj" for d in deliveries)


def test_retry_succeeds_after_transient_failures(receiver: Receiver) -> None:
    receiver.fail_first = 2
    deliveries: list[Delivery] = []
    dispatcher = Dispatcher(
        {"hook": WebhookChannel(url=receiver.url)},
        record=deliveries.append,
        policy=DeliveryPolicy(attempts=5, backoff_s=0.05),
    )
    try:
        dispatcher.submit(notification(), ["hook"])
        assert dispatcher.flush(timeout=10)
    finally:
        dispatcher.close()
    assert [(d.attempt, d.ok) for d in deliveries] == [(1, False), (2, False), (3, True)]
    assert len(receiver.requests) == 1


def test_full_queue_drops_and_counts() -> None:
    slow = SlowChannel()
    dispatcher = Dispatcher({"slow": slow}, record=lambda d: None, policy=DeliveryPolicy(max_queue=1))
    try:
        for _ in range(4):
            dispatcher.submit(notification(), ["slow"])
        wait_until(lambda: dispatcher.dropped >= 2, 30, f"{dispatcher.dropped} dropped, not 2 or more")
    finally:
        slow.release.set()
        dispatcher.close()
