"""``agentwatch`` errors a user can cause: one line naming the problem, a non-zero exit, no
traceback, nothing created by a typo; a misspelt option is answered with its command's usage.
And the command's assembly from the parts' entry points: their order, and a part that breaks."""

from __future__ import annotations

import argparse
import http.server
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from agentwatch.cli import build_parser


def _pythonpath(*extra: Path) -> str:
    """The repository and the test process's own path (a worktree's code, where one is tested)."""
    inherited = [p for p in os.environ.get("PYTHONPATH", "").split(":") if p]
    return ":".join([str(Path(__file__).resolve().parents[1]), *map(str, extra), *inherited])


def _agentwatch(*args: str, cwd: Path, path: tuple[Path, ...] = ()) -> subprocess.CompletedProcess[str]:
    pythonpath = _pythonpath(*path)
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


def test_an_unknown_option_before_any_command_is_named_as_such(tmp_path: Path) -> None:
    done = _agentwatch("--bogus", cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1] == (
        "agentwatch: error: unknown option --bogus (agentwatch --help lists the commands)"
    )
    assert "required" not in done.stderr


def test_no_command_at_all_asks_for_one(tmp_path: Path) -> None:
    done = _agentwatch(cwd=tmp_path)
    assert done.returncode == 2 and "a COMMAND is required" in done.stderr.splitlines()[-1]


@pytest.mark.parametrize("make", ["file", "under-a-file"])
def test_collector_on_an_unusable_data_dir_exits_in_one_line_creating_nothing(tmp_path: Path, make: str) -> None:
    (tmp_path / "afile").write_text("not a directory\n")
    data_dir = "afile" if make == "file" else "afile/data"
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    done = _agentwatch("collector", "--data-dir", data_dir, "--port", str(port), "--grpc-port", "0", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith(f"agentwatch collector: data directory {data_dir} ")
    assert "not a directory" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]


def test_collector_on_a_taken_port_exits_before_creating_its_data_dir(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = _agentwatch("collector", "--data-dir", "data", "--port", str(port), "--grpc-port", "0", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"agentwatch collector: the OTLP/HTTP and API port {port} on 127.0.0.1 is taken "
        "(Address already in use): stop what listens there or pick another with --port"
    ]
    assert not (tmp_path / "data").exists()


def test_collector_on_a_taken_grpc_port_names_the_flag_and_creates_nothing(tmp_path: Path) -> None:
    with socket.socket() as free, socket.socket() as taken:
        free.bind(("127.0.0.1", 0))
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port, grpc_port = free.getsockname()[1], taken.getsockname()[1]
        free.close()
        done = _agentwatch(
            "collector", "--data-dir", "data", "--port", str(port), "--grpc-port", str(grpc_port), cwd=tmp_path
        )
    assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert f"the OTLP/gRPC port {grpc_port} on 127.0.0.1 is taken" in done.stderr
    assert done.stderr.strip().endswith("--grpc-port (0 disables gRPC)") and not (tmp_path / "data").exists()


class _Metrics(http.server.BaseHTTPRequestHandler):
    """An engine's /metrics, counting its scrapes."""

    scrapes = 0

    def do_GET(self) -> None:  # noqa: N802 (the standard library's name)
        type(self).scrapes += 1
        body = b"vllm:num_requests_running 0\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.slow  # a collector process scraping for seconds (make test runs it, make quick not)
def test_collector_logs_no_line_per_engine_scrape_and_stops_on_sigterm_quietly(tmp_path: Path) -> None:
    """A real collector scraping a real /metrics endpoint: httpx's one INFO line per request stays out."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Metrics)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    env = {
        "PYTHONPATH": _pythonpath(),
        "PATH": "/usr/bin:/bin",
        "AGENTWATCH_SCRAPE_TARGETS": f"sim=http://127.0.0.1:{server.server_port}/metrics",
        "AGENTWATCH_SCRAPE_INTERVAL_S": "0.2",
    }
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agentwatch",
            "collector",
            "--data-dir",
            "data",
            "--port",
            str(port),
            "--grpc-port",
            "0",
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while _Metrics.scrapes < 3 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
        assert _Metrics.scrapes >= 3, "the collector never scraped the engine"
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        server.shutdown()
    assert "HTTP Request" not in out and "httpx" not in out, out
    assert "Traceback" not in out, out
