"""``agentwatch demo``, the product's main job, end to end in child processes.

A 40-second demo on free ports in a temporary data directory must store runs and fire a
cost-spike alert; run again on the same data directory it must start (the key and the data
are reused) and stop every child on Ctrl-C; after its traffic it keeps serving, with a ready
``export`` line for one's own agent, and a child that dies is reported by name; a taken port
is a clear error.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.support import local_http
from tests.support.poll import wait_until

PORTS = (4318, 4317, 8000, 8501)
# Bounds that only catch a hang, never a slow machine: in issue 37's stress run 14 (load ~24) the
# 40 s demo took 3 min from start to its report, and its report now also waits for the crashed
# agent's run to turn incomplete.
DEMO_S = 900
HANG_S = 300
pytestmark = pytest.mark.slow  # about two minutes on two busy cores: a 40 s demo plus a restart


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _free_offset() -> int:
    """A --port-offset that moves every default port of the demo onto a free one."""
    rng = random.Random()
    for _ in range(200):
        offset = rng.randrange(
            6_000, 24_000
        )  # below the ephemeral range (32768+), where bind(0) and outgoing connections land
        if all(_port_free(port + offset) for port in PORTS):
            return offset
    raise RuntimeError("no free port offset found")


def _demo(data_dir: Path, offset: int, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "agentwatch",
        "demo",
        "--no-browser",
        "--data-dir",
        str(data_dir),
        "--port-offset",
        str(offset),
        *extra,
    ]


def _start(
    data_dir: Path, offset: int, *extra: str, sigint: signal.Handlers | None = None, stderr: int = subprocess.PIPE
) -> subprocess.Popen[str]:
    """The demo in a subprocess, its output read as text. ``sigint``: the SIGINT disposition it
    starts with (``SIG_IGN`` as a shell's ``cmd &`` gives it; None: inherited)."""

    def preexec() -> None:
        if sigint is not None:
            signal.signal(signal.SIGINT, sigint)

    return subprocess.Popen(
        _demo(data_dir, offset, *extra), stdout=subprocess.PIPE, stderr=stderr, text=True, preexec_fn=preexec
    )


def _read_until(proc: subprocess.Popen[str], done: Callable[[str], bool]) -> str:
    """The demo's output up to and including the first line ``done`` accepts (all of it if none does)."""
    lines = []
    for line in proc.stdout:  # type: ignore[union-attr]
        lines.append(line)
        if done(line):
            break
    return "".join(lines)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("demo")


def test_short_demo_stores_runs_and_fires_a_cost_alert(data_dir: Path) -> None:
    offset = _free_offset()
    done = subprocess.run(
        _demo(data_dir, offset, "--duration", "40", "--exit-when-done"), capture_output=True, text=True, timeout=DEMO_S
    )
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert out.index(f"http://127.0.0.1:{8501 + offset}") < out.index("phase 1/2")  # URLs first
    runs = int(re.search(r"runs recorded by the collector: (\d+)", out).group(1))  # type: ignore[union-attr]
    assert runs >= 10
    # the live view: the long run is running while the traffic lasts; the agent killed mid-run is incomplete by the end
    assert max(int(n) for n in re.findall(r"; (\d+) running, \d+ incomplete$", out, re.MULTILINE)) >= 1, out
    assert (
        int(re.search(r"runs recorded by the collector: \d+ \(\d+ running, (\d+) incomplete\)", out).group(1)) >= 1
    ), out  # type: ignore[union-attr]
    assert "an agent was killed mid-run (SIGKILL" in out and "turns incomplete after 20 s without a span" in out
    saved = dict(re.findall(r"^saved by (\w+): \$([0-9.]+) ", out, re.MULTILINE))
    assert set(saved) == {"cache", "routing", "degradation", "rate_limit"}, out
    assert all(float(saved[lever]) > 0 for lever in ("cache", "routing", "degradation")), out
    # The rate limit saves only what it refused: on a loaded machine the agents come slowly enough
    # that its queue serves every request (run 12 of issue 37: "0 refused", $0 over 2 queued events).
    refused = sum(int(n) for n in re.findall(r", (\d+) refused$", out, re.MULTILINE))
    assert (float(saved["rate_limit"]) > 0) == (refused > 0), out
    fired = re.findall(r"^alert fired: (\S+) ", out, re.MULTILINE)
    assert any("cost" in rule for rule in fired), out
    # The spike's runs are version 1.1 of the agent (the baseline's 1.0): the release rule opens
    # one incident, for 1.1, and only once however often it is evaluated.
    releases = re.findall(r"^alert fired: demo-release-cost-regression \[critical\] (\{.*?\}):", out, re.MULTILINE)
    assert releases == ["{'version': '1.1'}"], out
    assert all(_port_free(port + offset) for port in PORTS)  # every child stopped


def test_demo_runs_again_on_the_same_data_and_stops_on_ctrl_c(data_dir: Path) -> None:
    offset, since = _free_offset(), time.time()
    # As from a terminal: a runner that started pytest in the background (SIGINT ignored, which
    # children inherit) must not make the demo deaf to the Ctrl-C this test sends.
    proc = _start(data_dir, offset, "--duration", "120", sigint=signal.SIG_DFL, stderr=subprocess.STDOUT)
    try:
        out = _read_until(proc, lambda line: line.startswith("phase 1/2"))
        assert "phase 1/2" in out, out
        _wait_run_under_way(data_dir, offset, since)  # into the traffic: Ctrl-C mid-run is the case under test
        os.kill(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=HANG_S) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
    _wait_ports_freed(offset)


def test_demo_keeps_serving_after_its_traffic_and_names_a_dead_child(tmp_path: Path) -> None:
    offset = _free_offset()
    proc = _start(tmp_path, offset, "--duration", "10", "--users", "1")
    try:
        out = _read_until(proc, lambda line: "Ctrl-C stops everything" in line)
        assert f"export AGENTWATCH_ENDPOINT=http://127.0.0.1:{4318 + offset} AGENTWATCH_API_KEY=aw_" in out, out
        assert "keeps serving" in out and proc.poll() is None, out
        time.sleep(2)  # a while of serving: it must not stop by itself
        assert proc.poll() is None, "the demo stopped after its traffic"
        collector_pid = json.loads((tmp_path / "collector.json").read_text())["pid"]
        os.kill(collector_pid, signal.SIGKILL)
        assert proc.wait(timeout=HANG_S) == 1
        err = proc.stderr.read()  # type: ignore[union-attr]
        assert "the collector process exited with code -9" in err and "Traceback" not in err, err
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=HANG_S)
    _wait_ports_freed(offset)


def test_taken_port_is_a_clear_error(tmp_path: Path) -> None:
    offset = _free_offset()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 8000 + offset))
        taken.listen()
        done = subprocess.run(_demo(tmp_path, offset), capture_output=True, text=True, timeout=HANG_S)
    assert done.returncode == 1
    assert f"port {8000 + offset} (engine) is taken" in done.stderr and "--port-offset" in done.stderr


def test_sigterm_during_the_traffic_stops_the_demo_without_a_traceback(tmp_path: Path) -> None:
    """As a service manager stops it: SIGTERM while the simulated users' runs are under way. Started
    with SIGINT ignored, as a shell starts ``agentwatch demo &``: SIGTERM still stops it."""
    offset = _free_offset()
    proc = _start(tmp_path, offset, "--duration", "120", "--users", "1", sigint=signal.SIG_IGN)
    try:
        started = _read_until(proc, lambda line: line.startswith("phase 1/2"))
        assert "phase 1/2" in started, started
        assert "content capture is on" in started  # the demo's own prompts show on the dashboard
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=HANG_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1] == "agentwatch demo: interrupted; every child process was stopped", err
    assert "Traceback" not in err + out and "exception" not in (err + out).lower(), err
    _wait_ports_freed(offset)


def test_a_killed_demo_leaves_no_child_behind(tmp_path: Path) -> None:
    """SIGKILL gives the demo no chance to stop its children: each dies with it (Linux's parent-death
    signal), so no collector keeps the ports and the data directory. Killed during its traffic, when
    it has the most children (the stack's and the live view's agents); the demo's state does not
    matter to a signal it never sees, so the test does not wait for the traffic's end."""
    offset = _free_offset()
    proc = _start(tmp_path, offset, "--duration", "120", "--users", "1", stderr=subprocess.DEVNULL)
    try:
        started = _read_until(proc, lambda line: line.startswith("phase 1/2"))
        assert "phase 1/2" in started, started
        collector_pid = json.loads((tmp_path / "collector.json").read_text())["pid"]
        proc.kill()
        proc.wait(timeout=HANG_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    wait_until(
        lambda: not _alive(collector_pid) and all(_port_free(port + offset) for port in PORTS),
        HANG_S,
        "a child of the killed demo is still alive or holds a port",
        interval=0.5,
    )
    assert not _alive(collector_pid), "the collector outlived the killed demo"
    assert all(_port_free(port + offset) for port in PORTS)


def _wait_run_under_way(data_dir: Path, offset: int, since: float) -> None:
    """Until the demo's collector lists a running run started after ``since`` (spans stored, its
    root not yet): this demo's traffic is under way (an earlier demo's runs on the data are older)."""
    url = f"http://127.0.0.1:{4318 + offset}/api/overview"
    headers = {"Authorization": f"Bearer {(data_dir / 'demo-read-key').read_text().strip()}"}

    def running() -> bool:
        with contextlib.suppress(httpx.HTTPError):
            answer = local_http.get(url, params={"start": since}, headers=headers, timeout=10)
            return answer.status_code == 200 and answer.json()["running_runs"] > 0
        return False

    wait_until(running, HANG_S, "no run of the demo's traffic was under way", interval=0.2)


def _wait_ports_freed(offset: int) -> None:
    """Every port of the demo free again (its children stopped, their sockets closed)."""
    wait_until(lambda: all(_port_free(port + offset) for port in PORTS), HANG_S, "a port of the demo is still taken")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def test_sigterm_while_serving_stops_the_demo_as_a_normal_end(tmp_path: Path) -> None:
    """After its traffic the demo serves until stopped: SIGTERM then (started in the background,
    SIGINT ignored) is the normal end, in one line, exit code 0."""
    offset = _free_offset()
    proc = _start(tmp_path, offset, "--duration", "10", "--users", "1", sigint=signal.SIG_IGN)
    try:
        _read_until(proc, lambda line: "Ctrl-C stops everything" in line)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=HANG_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert err.strip().splitlines()[-1] == "agentwatch demo: stopped; every child process was stopped", err
    assert "Traceback" not in err + out, err
