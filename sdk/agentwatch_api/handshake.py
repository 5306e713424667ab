"""How a command finds the collector that owns a data directory: ``admin.token`` and ``collector.json``.

A collector on embedded chDB owns its data directory (one process per store). At start it writes
a fresh admin token there (mode 0600, readable only by whoever can read the data files anyway)
and ``collector.json`` (``{"pid", "url"}``), and removes the latter at exit. Commands on the same
machine (``agentwatch keys``, ``agentwatch reprice``, the demo) read both and ask that collector
over HTTP instead of opening its store. Both sides use this module, so the names and the format
live in one place.
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

ADMIN_TOKEN_FILE = "admin.token"
RUNTIME_FILE = "collector.json"


@dataclass(frozen=True)
class RunningCollector:
    """A live collector that owns a data directory: where it listens, and its admin token."""

    url: str
    admin_token: str


def write_admin_token(data_dir: Path) -> str:
    """A fresh admin token for this run, in ``data_dir/admin.token`` with mode 0600."""
    token = secrets.token_urlsafe(32)
    data_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(data_dir / ADMIN_TOKEN_FILE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token)
    return token


def read_admin_token(data_dir: Path) -> str | None:
    try:
        return (data_dir / ADMIN_TOKEN_FILE).read_text().strip() or None
    except OSError:
        return None


def write_runtime(data_dir: Path, url: str) -> Path:
    """``collector.json`` naming this process and ``url``; the caller removes it at exit."""
    path = data_dir / RUNTIME_FILE
    path.write_text(json.dumps({"pid": os.getpid(), "url": url}))
    return path


def running_collector(data_dir: Path) -> RunningCollector | None:
    """The live collector that owns ``data_dir``, or None (none started there, or it exited)."""
    try:
        runtime = json.loads((data_dir / RUNTIME_FILE).read_text())
        os.kill(int(runtime["pid"]), 0)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    token = read_admin_token(data_dir)
    return RunningCollector(str(runtime["url"]), token) if token else None
