"""The local stack's processes: the collector, the simulated engine and the dashboard as children.

``agentwatch demo``, the benchmarks and the tests start the same processes the same way, so
this module needs only the base install (no ``openai``, which the research agent needs):

- ``ProcessGroup``: children in sessions of their own, each logging to a file, stopped newest
  first (SIGTERM, then SIGKILL), and on Linux sent SIGTERM when this process dies, even by
  SIGKILL (``PR_SET_PDEATHSIG``), so no child is left holding a port or a data directory;
- ``start_collector`` and ``start_engine``; ``collector_command`` for a caller that runs the
  collector by itself (a benchmark's own process, a test's restarts);
- the default ports, moved together by an offset (``stack_ports``), and ``check_ports``;
- ``handle_stop_signals``: SIGTERM stops the stack as Ctrl-C does, also when started in the
  background by a shell; ``interrupts_ignored`` while the children are being stopped.

Keys for the stack's projects are ``reference_agent.keys``.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import httpx

DEFAULT_PORTS = {"collector": 4318, "collector-grpc": 4317, "engine": 8000, "dashboard": 8501}


class StackError(Exception):
    """A child process could not start or died, or a key could not be made; says what to do."""


def stack_ports(offset: int = 0) -> dict[str, int]:
    """Every default port moved by ``offset`` (``agentwatch demo --port-offset``)."""
    return {name: port + offset for name, port in DEFAULT_PORTS.items()}


def check_ports(ports: dict[str, int]) -> None:
    """A ``StackError`` naming the first port that something else listens on."""
    for name, port in ports.items():
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers do: TIME_WAIT is no obstacle
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                raise StackError(
                    f"port {port} ({name}) is taken: stop what listens there or pass --port-offset N to move every port"
                ) from None


class ProcessGroup:
    """Child processes in their own sessions, logs in files, stopped in reverse order."""

    def __init__(self, log_dir: Path, log: Callable[[str], None]) -> None:
        log_dir.mkdir(parents=True, exist_ok=True)
        self._log_dir, self._log = log_dir, log
        self._children: list[tuple[str, subprocess.Popen[bytes]]] = []

    def start(self, name: str, argv: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        log_path = self._log_dir / f"{name}.log"
        with log_path.open("ab") as log_file:
            proc = subprocess.Popen(
                argv,
                env={**os.environ, **env},
                stdout=log_file,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        self._children.append((name, proc))
        return proc

    def wait_ready(self, name: str, url: str, *, timeout_s: float = 60.0) -> None:
        """Poll ``url`` until it answers 200; a child that exits first is an error with its log."""
        proc = dict(self._children)[name]
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise StackError(f"{name} exited with code {proc.returncode}:\n{self.log_tail(name)}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url, timeout=2.0).status_code == 200:
                    return
            time.sleep(0.2)
        raise StackError(f"{name} did not answer {url} within {timeout_s:.0f} s:\n{self.log_tail(name)}")

    def dead(self) -> list[tuple[str, int]]:
        """(name, exit code) of each child that has exited."""
        return [(name, code) for name, proc in self._children if (code := proc.poll()) is not None]

    def check_alive(self, names: Iterable[str]) -> None:
        """Raise a StackError naming the first of ``names`` that has exited, with the end of its log."""
        wanted = set(names)
        for name, code in self.dead():
            if name in wanted:
                raise StackError(
                    f"the {name} process exited with code {code}; the end of its log "
                    f"({self._log_dir / (name + '.log')}):\n{self.log_tail(name)}"
                )

    def log_tail(self, name: str, lines: int = 20) -> str:
        text = (self._log_dir / f"{name}.log").read_text(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        """Stop the children one by one, newest first (SIGTERM, wait, then SIGKILL), so each
        stops while what it reports to still runs: the engine's last spans reach the collector."""
        for name, proc in reversed(self._children):
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self._log(f"  {name} did not stop on SIGTERM; killing it")
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)
        self._children.clear()


_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform == "linux" else None
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child, before exec (Linux): SIGTERM when its parent dies, even by SIGKILL, so no
    collector or engine is left holding its ports and its data directory."""
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def agentwatch_command(*args: str) -> list[str]:
    """``agentwatch ARGS`` run by this interpreter (the command of the environment it runs in)."""
    return [sys.executable, "-m", "agentwatch", *args]


def collector_command(data_dir: Path, *, port: int, grpc_port: int = 0, log_level: str = "warning") -> list[str]:
    """``agentwatch collector`` on embedded chDB in ``data_dir``, for a caller that runs it itself."""
    return agentwatch_command(
        "collector",
        *("--port", str(port), "--grpc-port", str(grpc_port)),
        *("--data-dir", str(data_dir), "--log-level", log_level),
    )


def start_collector(
    group: ProcessGroup, data_dir: Path, *, port: int, grpc_port: int, env: dict[str, str] | None = None
) -> str:
    """``agentwatch collector`` on embedded chDB in ``data_dir``; returns its URL once it answers."""
    url = f"http://127.0.0.1:{port}"
    group.start(
        "collector",
        agentwatch_command("collector"),
        {
            "AGENTWATCH_DATA_DIR": str(data_dir),
            "AGENTWATCH_PORT": str(port),
            "AGENTWATCH_GRPC_PORT": str(grpc_port),
            "AGENTWATCH_HOST": "127.0.0.1",
            **(env or {}),
        },
    )
    group.wait_ready("collector", url + "/metrics")
    return url


def start_engine(
    group: ProcessGroup, *, port: int, speed: float, collector: str | None = None, key: str | None = None
) -> str:
    """``agentwatch engine --sim`` (its spans sent to ``collector``); returns its URL, not waiting.
    The key goes in the environment, never on the command line (where ``ps`` shows it)."""
    tracing = ["--otlp-endpoint", collector] if collector else []
    group.start(
        "engine",
        agentwatch_command("engine", "--sim", "--port", str(port), "--speed", str(speed), *tracing),
        {"AGENTWATCH_API_KEY": key or ""} if collector else {},
    )
    return f"http://127.0.0.1:{port}"


def handle_stop_signals() -> None:
    """SIGTERM stops the stack as Ctrl-C does (children first, then exit), and Ctrl-C works also
    when a shell started this process in the background (``cmd &`` ignores SIGINT in its children:
    then neither SIGINT nor SIGTERM, answered as SIGINT is, would stop it)."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _interrupt)


def _interrupt(signum: int, frame: object) -> None:
    """SIGTERM is answered as Ctrl-C is: by whatever handles SIGINT now. Inside ``asyncio.run``
    that is its runner, which cancels the traffic's main task and then raises KeyboardInterrupt;
    a KeyboardInterrupt raised here instead landed inside whichever task was running, which
    asyncio then reported as a 31-line "Task exception was never retrieved" traceback. Ignored
    while the children are being stopped (``interrupts_ignored``)."""
    handler = signal.getsignal(signal.SIGINT)
    if callable(handler):
        handler(signal.SIGINT, frame)  # type: ignore[arg-type]
    elif handler == signal.SIG_DFL:
        raise KeyboardInterrupt


@contextlib.contextmanager
def interrupts_ignored() -> Iterator[None]:
    """Ctrl-C (and so SIGTERM) ignored inside the block: a second one must not leave children behind."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
