"""``agentwatch engine --sim`` as a user runs it: a real process serving on 127.0.0.1."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from agentwatch_platform.reference_agent import cli
from tests.support import local_http
from tests.support.ports import free_port


def test_engine_sim_command_serves_and_says_it_is_a_simulation() -> None:
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agentwatch",
            "engine",
            "--sim",
            "--port",
            str(port),
            "--slots",
            "4",
            "--policy",
            "static",
            "--speed",
            "50",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None, process.stdout.read()
            try:
                if local_http.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                assert time.monotonic() < deadline, "engine did not start within 30 s"
                time.sleep(0.1)
        reply = local_http.post(
            f"http://127.0.0.1:{port}/v1/chat/completions",
            timeout=10,
            json={"model": "sim-small", "messages": [{"role": "user", "content": "hi"}]},
        ).json()
        assert reply["choices"][0]["message"]["content"].startswith("(simulated engine)")
    finally:
        process.terminate()
        output, _ = process.communicate(timeout=15)
    assert "a simulation, not a model" in output
    assert "static batching, 4 slots" in output


def test_engine_sim_rejects_an_unknown_model_with_a_clear_message() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "agentwatch", "engine", "--sim", "--models", "gpt-9"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "unknown simulated model 'gpt-9'" in result.stderr


def test_engine_refuses_a_key_on_its_command_line_where_ps_shows_it() -> None:
    for option in ("--api-key", "--admin-key"):
        result = subprocess.run(
            [sys.executable, "-m", "agentwatch", "engine", "--sim", option, "secret-key-1"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 2
        assert "`ps`" in result.stderr and f"{option}-file" in result.stderr
        assert "secret-key-1" not in result.stderr


def test_engine_keys_come_from_a_key_file_else_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key_file = tmp_path / "key"
    key_file.write_text("from-the-file\n")
    monkeypatch.setenv("AGENTWATCH_API_KEY", "from-the-environment")
    assert cli._key(str(key_file), "AGENTWATCH_API_KEY") == "from-the-file"
    assert cli._key(None, "AGENTWATCH_API_KEY") == "from-the-environment"
    monkeypatch.delenv("AGENTWATCH_API_KEY")
    assert cli._key(None, "AGENTWATCH_API_KEY") is None
    with pytest.raises(SystemExit, match="cannot read the key file"):
        cli._key(str(tmp_path / "missing"), "AGENTWATCH_API_KEY")
