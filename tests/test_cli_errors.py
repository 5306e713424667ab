"""``agentwatch`` errors a user can cause: one line naming the problem, a non-zero exit, no
traceback, nothing created by a typo; a misspelt option is answered with its command's usage."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def _agentwatch(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agentwatch_cli", *args], capture_output=True, text=True,
                          timeout=60, cwd=cwd, env={"PYTHONPATH": str(Path(__file__).resolve().parents[1]),
                                                    "PATH": "/usr/bin:/bin"})


def test_keys_create_on_a_file_names_it_without_a_traceback(tmp_path: Path) -> None:
    done = _agentwatch("keys", "create", "--project", "x", "--data-dir", "/etc/passwd", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip() == "agentwatch keys: --data-dir /etc/passwd is not a directory"


@pytest.mark.parametrize("action", [["list"], ["revoke", "k123"]])
def test_keys_on_a_mistyped_data_dir_creates_nothing(tmp_path: Path, action: list[str]) -> None:
    done = _agentwatch("keys", *action, "--data-dir", "agentwatch-typo", cwd=tmp_path)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "no collector data in agentwatch-typo" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "agentwatch-typo").exists()


@pytest.mark.parametrize(("argv", "usage"), [
    (["dashboard", "--prot", "3"], "usage: agentwatch dashboard"),
    (["keys", "list", "--jsn"], "usage: agentwatch keys list"),
    (["keys", "craete"], "usage: agentwatch keys"),
    (["demo", "--duraton", "3"], "usage: agentwatch demo"),
])
def test_a_typo_in_a_subcommand_shows_that_subcommands_usage(tmp_path: Path, argv: list[str], usage: str) -> None:
    done = _agentwatch(*argv, cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.startswith(usage), done.stderr
    assert "Traceback" not in done.stderr
