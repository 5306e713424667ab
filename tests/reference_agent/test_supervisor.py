"""reference_agent.supervisor and .keys: the local stack's processes and keys, on the base install.

Benchmarks and tests start the collector and the engine through them; the OpenAI client (the
``reference`` extra, which the research agent and the demo need) must not be needed for that.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from agentwatch_platform.reference_agent.supervisor import (
    DEFAULT_PORTS,
    ProcessGroup,
    StackError,
    check_ports,
    collector_command,
    stack_ports,
)
from tests.support.poll import wait_until


def test_the_supervisor_and_the_keys_import_without_openai() -> None:
    blocked = "import sys; sys.modules['openai'] = None; "  # `import openai` now raises ImportError
    modules = ("supervisor", "keys")
    code = blocked + "; ".join(f"import agentwatch_platform.reference_agent.{m}" for m in modules)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_the_port_offset_moves_every_port() -> None:
    assert stack_ports(0) == DEFAULT_PORTS
    assert stack_ports(7) == {name: port + 7 for name, port in DEFAULT_PORTS.items()}


def test_a_taken_port_is_named_with_what_to_do() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        taken = sock.getsockname()[1]
        with pytest.raises(StackError, match=rf"port {taken} \(collector\) is taken: .*--port-offset"):
            check_ports({"collector": taken})


def test_the_collector_command_runs_this_interpreter(tmp_path: Path) -> None:
    argv = collector_command(tmp_path, port=1234)
    assert argv[:4] == [sys.executable, "-m", "agentwatch", "collector"]
    assert argv[4:] == ["--port", "1234", "--grpc-port", "0", "--data-dir", str(tmp_path), "--log-level", "warning"]


def test_a_dead_child_is_named_with_its_log_and_the_rest_are_stopped(tmp_path: Path) -> None:
    group = ProcessGroup(tmp_path / "logs", log=lambda line: None)
    try:
        sleeper = group.start("sleeper", [sys.executable, "-c", "import time; time.sleep(600)"], {})
        group.start("crasher", [sys.executable, "-c", "print('out of luck'); raise SystemExit(3)"], {})
        wait_until(lambda: group.dead(), 60, "the crashing child did not exit")
        with pytest.raises(StackError, match=r"(?s)the crasher process exited with code 3.*out of luck"):
            group.check_alive(["sleeper", "crasher"])
        group.check_alive(["sleeper"])
    finally:
        group.stop()
    assert sleeper.poll() == -signal.SIGTERM


@pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG is Linux's")
def test_a_child_gets_sigterm_when_its_parent_is_killed(tmp_path: Path) -> None:
    """The parent (a process that starts a group and then waits) is SIGKILLed: its child goes too."""
    pid_file = tmp_path / "child.pid"
    parent = (
        "import sys, time; from pathlib import Path\n"
        "from agentwatch_platform.reference_agent.supervisor import ProcessGroup\n"
        f"group = ProcessGroup(Path({str(tmp_path / 'logs')!r}), print)\n"
        "child = group.start('child', [sys.executable, '-c', 'import time; time.sleep(600)'], {})\n"
        f"Path({str(pid_file)!r}).write_text(str(child.pid))\n"
        "time.sleep(600)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", parent])
    try:
        wait_until(lambda: pid_file.exists() and pid_file.read_text(), 60, "the parent did not start its child")
        child = int(pid_file.read_text())
        proc.kill()
        proc.wait(30)
        wait_until(lambda: not _alive(child), 30, "the child outlived its SIGKILLed parent")
    finally:
        proc.kill()


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not yet reaped by init, counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False
