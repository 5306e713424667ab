"""``agentwatch`` errors a user can cause: one line naming the problem, a non-zero exit, no
traceback, nothing created by a typo; a misspelt option is answered with its command's usage.
And the command's assembly from the parts' entry points: their order, and a part that breaks."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest
from agentwatch.cli import build_parser


def _agentwatch(*args: str, cwd: Path, path: tuple[Path, ...] = ()) -> subprocess.CompletedProcess[str]:
    pythonpath = ":".join(map(str, (Path(__file__).resolve().parents[1], *path)))
    return subprocess.run(
        [sys.executable, "-m", "agentwatch", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        env={"PYTHONPATH": pythonpath, "PATH": "/usr/bin:/bin"},
    )


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


@pytest.mark.parametrize(
    ("argv", "usage"),
    [
        (["dashboard", "--prot", "3"], "usage: agentwatch dashboard"),
        (["keys", "list", "--jsn"], "usage: agentwatch keys list"),
        (["keys", "craete"], "usage: agentwatch keys"),
        (["demo", "--duraton", "3"], "usage: agentwatch demo"),
    ],
)
def test_a_typo_in_a_subcommand_shows_that_subcommands_usage(tmp_path: Path, argv: list[str], usage: str) -> None:
    done = _agentwatch(*argv, cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.startswith(usage), done.stderr
    assert "Traceback" not in done.stderr


def test_the_commands_come_in_the_order_the_parts_are_declared() -> None:
    """pyproject.toml's ``agentwatch.commands``, by name: collector, reference stack, alerts, dashboard."""
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert list(sub.choices) == [
        "collector",
        "keys",
        "reprice",
        "whatif",
        "delete",
        "engine",
        "agent",
        "loadgen",
        "demo",
        "alerts",
        "dashboard",
    ]


def test_a_part_that_fails_to_import_is_named_in_one_line_and_the_others_still_work(tmp_path: Path) -> None:
    """An installed distribution (its dist-info on the path) whose registrar's module is missing."""
    dist = tmp_path / "site" / "broken_part-0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-part\nVersion: 0\n")
    (dist / "entry_points.txt").write_text("[agentwatch.commands]\nbroken = no_such_part.cli:register\n")
    done = _agentwatch("--help", cwd=tmp_path, path=(tmp_path / "site",))
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [
        "agentwatch: the 'broken' commands are unavailable (no_such_part.cli:register: "
        "ModuleNotFoundError: No module named 'no_such_part')"
    ]
    listed = [
        line.split()[0]
        for line in done.stdout.split("COMMAND\n", 1)[1].split("\n\n")[0].splitlines()
        if line.startswith("    ") and not line.startswith("     ")
    ]
    assert listed == [
        "collector",
        "keys",
        "reprice",
        "whatif",
        "delete",
        "engine",
        "agent",
        "loadgen",
        "demo",
        "alerts",
        "dashboard",
    ]


def test_the_collector_runs_the_alerts_as_its_installed_plugin() -> None:
    """pyproject.toml's ``agentwatch.collector_plugins``, as ``agentwatch collector`` loads them."""
    from agentwatch_platform.alerts.plugin import PLUGIN
    from agentwatch_platform.collector.plugins import installed

    assert installed() == (PLUGIN,)
