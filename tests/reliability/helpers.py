"""Helpers of the reliability tests: an in-process collector (the real app over a temporary
chDB, driven through Starlette's TestClient with its lifespan running), OTLP bodies built
from plain data, and reads of what the store really holds."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.testclient import TestClient

from agentwatch_platform.collector.app import create_app
from tests.collector.ingest_helpers import alerts_plugin, settings_for
from tests.support.poll import wait_until

PROTOBUF = {"Content-Type": "application/x-protobuf"}
JSON = {"Content-Type": "application/json"}


@dataclass
class InProcess:
    """The collector app with its lifespan running, and one API key per project."""

    app: FastAPI
    client: TestClient
    keys: dict[str, str] = field(default_factory=dict)

    def key(self, project: str) -> str:
        if project not in self.keys:
            self.keys[project] = self.app.state.keyring.create(project).key
        return self.keys[project]

    def auth(self, project: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key(project)}"}

    def post_traces(self, body: bytes, project: str, headers: dict[str, str]) -> Any:
        return self.client.post("/v1/traces", content=body, headers={**headers, **self.auth(project)})

    def drain(self, timeout: float = 30.0) -> None:
        """Wait until the writer has stored everything it accepted."""
        wait_until(lambda: self.app.state.ingestor.writer.queued_spans == 0, timeout, "writer did not drain")

    def span_counts(self, project: str, trace_ids: Iterable[str]) -> dict[str, int]:
        """Rows per trace id actually in the store (duplicates would count twice)."""
        ids = sorted(set(trace_ids))
        if not ids:
            return {}
        rows = self.app.state.store.query(
            "SELECT trace_id, count() AS n FROM spans WHERE project = {p:String} AND trace_id IN {ids:Array(String)} GROUP BY trace_id",
            {"p": project, "ids": ids},
        )
        return {r["trace_id"]: int(r["n"]) for r in rows}


@contextlib.contextmanager
def in_process(data_dir: Path, **overrides: Any) -> Iterator[InProcess]:
    """``create_app`` on a chDB under ``data_dir``; the store is closed when the block ends."""
    settings = settings_for(data_dir, **{"flush_interval_s": 0.05, **overrides})
    app = create_app(settings, plugins=(alerts_plugin(),))  # as `agentwatch collector` assembles it
    with TestClient(app, raise_server_exceptions=False) as client:
        yield InProcess(app, client)


def rss_bytes() -> int:
    """Resident set size of this process (Linux)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def new_trace_id() -> bytes:
    return os.urandom(16)
