"""Real servers the alerts tests deliver to: a webhook receiver's records and an SMTP mailbox."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> dict:
        return json.loads(self.body)


@dataclass
class Receiver:
    """A real HTTP server that records every POST; ``fail_first`` answers 500 that many times."""

    url: str
    requests: list[Received] = field(default_factory=list)
    fail_first: int = 0

    def wait_for(self, count: int, timeout: float = 10.0) -> list[Received]:
        deadline = time.monotonic() + timeout
        while len(self.requests) < count and time.monotonic() < deadline:
            time.sleep(0.02)
        return list(self.requests)


def receiver_handler(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if receiver.fail_first > 0:
                receiver.fail_first -= 1
                self.send_response(500)
                self.end_headers()
                self.wfile.write(b"receiver down")
                return
            receiver.requests.append(Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: object) -> None:
            pass

    return Handler


class Mailbox:
    """aiosmtpd handler keeping every message it accepts."""

    def __init__(self) -> None:
        self.messages: list[tuple[str, list[str], bytes]] = []

    async def handle_DATA(self, server: object, session: object, envelope: object) -> str:  # noqa: N802 (aiosmtpd's naming)
        self.messages.append((envelope.mail_from, list(envelope.rcpt_tos), envelope.content))  # type: ignore[attr-defined]
        return "250 Message accepted for delivery"

    def wait_for(self, count: int, timeout: float = 10.0) -> list[tuple[str, list[str], bytes]]:
        deadline = time.monotonic() + timeout
        while len(self.messages) < count and time.monotonic() < deadline:
            time.sleep(0.02)
        return list(self.messages)
