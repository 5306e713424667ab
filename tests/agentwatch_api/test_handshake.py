"""The running-collector handshake: what the collector writes is what the commands read."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from agentwatch_api import handshake


def test_a_live_collector_is_found_by_its_files(tmp_path: Path) -> None:
    token = handshake.write_admin_token(tmp_path / "data")
    handshake.write_runtime(tmp_path / "data", "http://127.0.0.1:4318")
    assert (tmp_path / "data" / handshake.ADMIN_TOKEN_FILE).stat().st_mode & 0o777 == 0o600
    assert handshake.running_collector(tmp_path / "data") == handshake.RunningCollector("http://127.0.0.1:4318", token)


def test_an_exited_collector_or_a_missing_token_is_none(tmp_path: Path) -> None:
    assert handshake.running_collector(tmp_path) is None  # nothing there
    handshake.write_runtime(tmp_path, "http://127.0.0.1:4318")
    assert handshake.running_collector(tmp_path) is None  # no admin token
    handshake.write_admin_token(tmp_path)
    exited = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True
    )
    (tmp_path / handshake.RUNTIME_FILE).write_text(json.dumps({"pid": int(exited.stdout), "url": "http://127.0.0.1:1"}))
    assert handshake.running_collector(tmp_path) is None
    (tmp_path / handshake.RUNTIME_FILE).write_text("{not json")
    assert handshake.running_collector(tmp_path) is None
