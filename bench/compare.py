"""agentwatch against Arize Phoenix: ingest, queries, memory, disk and SDK overhead, in one run.

Performance claims hold only as ratios measured side by side, so this script generates one
seeded agent-like workload (``reference_agent/workload.py``), encodes it once as OTLP protobuf, and
feeds the same bytes to each product in turn on 127.0.0.1, one server at a time:

1. start the server (agentwatch's collector on embedded chDB; Phoenix on its default SQLite)
   in a fresh data directory, sampling the memory of its process tree;
2. post every batch as fast as it is accepted (honouring 429/503 ``Retry-After``), then poll
   the product's own API until every span is queryable;
3. ask the same questions through each product's own API (span count, run count, total
   tokens, error count, run latency p50/p95 over an hour-long range, one whole trace),
   check the answers against the workload's known totals, and time repeated calls;
4. stop it and measure its data directory.

Then the per-call cost of tracing an empty function: ``@agentwatch.tool``, a bare
OpenTelemetry span, and Phoenix's ``@tracer.tool`` (``bench/compare_sdk.py``).

Phoenix runs from its own virtualenv (``--phoenix-python``), never from agentwatch's. If it is
not installed, agentwatch is measured alone and the result says Phoenix was not measured.
``--profile`` runs py-spy on the collector during ingest and during the questions.
Run from the repository root:

    .venv/bin/python -m bench.compare                                  # 50k spans, both
    .venv/bin/python -m bench.compare --agentwatch-only --spans 1000000
"""

from __future__ import annotations

import abc
import argparse
import contextlib
import json
import os
import platform
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import metadata
from pathlib import Path
from typing import TypeVar

import httpx

from agentwatch_platform.reference_agent.workload import Workload

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"
DEFAULT_PHOENIX_PYTHON = REPO / ".venv-bench" / "bin" / "python"
PROTOBUF = {"Content-Type": "application/x-protobuf"}
DEFAULT_SPANS = 50_000
TARGETS = {  # name: (description, comparison, threshold)
    "ingest_e2e": ("end-to-end ingest, agentwatch / Phoenix", ">=", 300.0),
    "aggregate_queries": (
        "aggregate question latency, Phoenix / agentwatch (each question)",
        ">=",
        50.0,
    ),
    "first_call_aggregates": (
        "first call of each aggregate question, Phoenix / agentwatch's first overview call",
        ">=",
        10.0,
    ),
    "disk_per_span": ("disk bytes per span, Phoenix / agentwatch", ">=", 5.0),
    "peak_rss": ("server peak RSS, agentwatch / Phoenix", "<=", 0.25),
}
AGGREGATES = ("run_count", "total_tokens", "error_count", "latency_p50_p95")  # the 50x target
QUESTIONS = ("span_count", *AGGREGATES, "whole_trace")


T = TypeVar("T")


class BenchError(Exception):
    """A product could not be started, fed or queried; the message says which and why."""


class AccessDenied(BenchError):
    """A product refused the benchmark's credentials (401/403): waiting longer will not help."""


# --- processes, memory, disk -----------------------------------------------------------------


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            found.extend(int(p) for p in task.read_text().split())
        except OSError:
            continue
    return found


def tree_memory_bytes(root: int) -> tuple[int, int]:
    """(VmRSS, RssAnon) of a process and all its descendants, from /proc.

    RSS counts the pages of mapped files too (chDB's shared library is ~200 MB of them,
    shared and reclaimable); RssAnon is the memory the process itself allocated.
    """
    rss = anon = 0
    stack = [root]
    while stack:
        pid = stack.pop()
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                rss += int(line.split()[1]) * 1024
            elif line.startswith("RssAnon:"):
                anon += int(line.split()[1]) * 1024
        stack.extend(_children(pid))
    return rss, anon


class RssSampler(threading.Thread):
    """Samples a process tree's memory in the background and keeps the peaks.

    ``start`` and ``stop`` each take a sample in the caller's thread, so the peaks hold the
    memory at both ends however late a busy machine schedules the sampling thread."""

    def __init__(self, pid: int, interval_s: float = 0.1) -> None:
        super().__init__(name="rss-sampler", daemon=True)
        self.pid, self.interval_s = pid, interval_s
        self.peak_rss = self.peak_anon = 0
        self._done = threading.Event()
        self._lock = threading.Lock()

    def start(self) -> None:
        self.sample()
        super().start()

    def run(self) -> None:
        while not self._done.wait(self.interval_s):
            self.sample()

    def sample(self) -> None:
        rss, anon = tree_memory_bytes(self.pid)
        with self._lock:
            self.peak_rss, self.peak_anon = max(self.peak_rss, rss), max(self.peak_anon, anon)

    def stop(self) -> tuple[int, int]:
        self._done.set()
        self.join(timeout=5)
        self.sample()
        return self.peak_rss, self.peak_anon


def disk_bytes(path: Path) -> int:
    """Bytes allocated on disk under ``path`` (a file or a directory), as ``du`` counts them."""
    if path.is_file():
        return path.lstat().st_blocks * 512
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                continue
    return total


@dataclass
class Server:
    """A product's server process, the base URL it answers on and where it keeps its data."""

    name: str
    process: subprocess.Popen[bytes]
    base_url: str
    data_dir: Path
    log_path: Path
    headers: dict[str, str] = field(default_factory=dict)
    sampler: RssSampler | None = None

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def start_server(name: str, argv: list[str], env: dict[str, str], port: int, data_dir: Path, log_dir: Path) -> Server:
    log_path = log_dir / f"{name}.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            argv,
            env={**os.environ, **env},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = Server(name, process, f"http://127.0.0.1:{port}", data_dir, log_path)
    server.sampler = RssSampler(process.pid)
    server.sampler.start()
    return server


def wait_ready(server: Server, path: str, timeout_s: float) -> None:
    """Waits until the server answers HTTP at all (any status below 500)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise BenchError(f"{server.name} exited with {server.process.returncode}:\n{server.log_tail()}")
        try:
            if httpx.get(server.base_url + path, timeout=2).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise BenchError(
        f"{server.name} did not answer on {server.base_url}{path} within {timeout_s:.0f} s:\n{server.log_tail()}"
    )


def stop_server(server: Server) -> tuple[int, int]:
    """Stops the server (SIGTERM, then SIGKILL after 30 s); returns its peak (RSS, RssAnon)."""
    if server.process.poll() is None:
        os.killpg(server.process.pid, signal.SIGTERM)
        try:
            server.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.process.pid, signal.SIGKILL)
            server.process.wait(timeout=10)
    return server.sampler.stop() if server.sampler else (0, 0)


# --- ingest ----------------------------------------------------------------------------------


@dataclass
class IngestResult:
    spans: int
    requests: int
    retries: int
    accept_s: float  # first send to last acknowledgement
    queryable_s: float  # first send to every span answering the count query
    queryable: int  # spans the product counted at the end (== spans unless it timed out)

    @property
    def accepted_spans_per_s(self) -> float:
        return self.spans / self.accept_s

    @property
    def e2e_spans_per_s(self) -> float:
        return self.queryable / self.queryable_s


def _post(client: httpx.Client, url: str, body: bytes, headers: dict[str, str]) -> int:
    """Posts one batch until it is accepted; returns how many back-pressure retries it took."""
    retries = 0
    while True:
        response = client.post(url, content=body, headers=headers)
        if response.status_code < 300:
            return retries
        if response.status_code not in (429, 503):
            raise BenchError(f"{url} answered {response.status_code}: {response.text[:300]}")
        retries += 1
        time.sleep(float(response.headers.get("Retry-After", "0.5") or 0.5))


def send_all(server: Server, url_path: str, batches: Iterator[bytes], senders: int) -> tuple[int, int]:
    """Posts every batch from ``senders`` threads; returns (requests, retries)."""
    lock, counts, errors = threading.Lock(), [0, 0], []
    headers = {**PROTOBUF, **server.headers}

    def worker() -> None:
        with httpx.Client(base_url=server.base_url, timeout=120) as client:
            while not errors:
                with lock:
                    body = next(batches, None)
                if body is None:
                    return
                try:
                    retries = _post(client, url_path, body, headers)
                except (BenchError, httpx.HTTPError) as exc:
                    errors.append(exc)
                    return
                with lock:
                    counts[0] += 1
                    counts[1] += retries

    threads = [threading.Thread(target=worker, name=f"sender-{i}") for i in range(senders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise BenchError(f"{server.name}: ingest failed: {errors[0]}")
    return counts[0], counts[1]


def poll_interval(elapsed_s: float) -> float:
    """How long to wait before the next "all queryable?" poll: 1 % of the time measured so far,
    10 ms to 1 s. The poll then overstates the measured time by at most 1 % (or 10 ms), the same
    for both products, and asks a server ingesting for an hour about once a second.

    It was a ladder from the end of the sends (20 ms, growing 1.5x to 1 s), whose steps reach a
    third of the wait: agentwatch's last spans at 50k, queryable ~0.8 s after the last
    acknowledgement, could be seen up to ~0.3 s late, of 2.2 s in all."""
    return min(1.0, max(0.01, 0.01 * elapsed_s))


def wait_queryable(count: Callable[[], int], expected: int, timeout_s: float, *, since: float | None = None) -> int:
    """Polls ``count`` (every ``poll_interval`` of the time since ``since``, a ``perf_counter``
    reading: the first send) until it reaches ``expected``; a refused key (``AccessDenied``)
    ends the wait at once."""
    since = time.perf_counter() if since is None else since
    deadline, seen = time.monotonic() + timeout_s, 0
    while time.monotonic() < deadline:
        try:
            seen = count()
        except AccessDenied:
            raise
        except (BenchError, httpx.HTTPError):
            seen = 0
        if seen >= expected:
            return seen
        time.sleep(poll_interval(time.perf_counter() - since))
    return seen


def ingest(product: Product, server: Server, workload: Workload, senders: int, timeout_s: float) -> IngestResult:
    """Sends every batch, then waits until the product counts every span."""
    start = time.perf_counter()
    requests, retries = send_all(server, "/v1/traces", workload.batches(), senders)
    accepted = time.perf_counter()
    seen = wait_queryable(product.span_count, workload.totals.spans, timeout_s, since=start)
    done = time.perf_counter()
    return IngestResult(workload.totals.spans, requests, retries, accepted - start, done - start, seen)


def _phase(name: str, server: Server, profile: Path | None, extra: dict[str, object], fn: Callable[[], T]) -> T:
    """Runs one phase of a measurement, under py-spy when ``profile`` names a file."""
    if profile is None:
        return fn()
    path = profile.with_name(f"{profile.stem}_{name}.txt")
    with Profiler(server.process.pid, path):
        value = fn()
    shown = path.relative_to(REPO) if path.is_relative_to(REPO) else path
    extra[f"{name}_profile"] = {"file": str(shown), **summarize_profile(path)}
    return value


class Profiler:
    """py-spy sampling a server while it ingests, to show where its time goes."""

    def __init__(self, pid: int, out: Path) -> None:
        self.pid, self.out = pid, out
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Profiler:
        py_spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
        if py_spy is None:
            raise BenchError("--profile needs py-spy: .venv/bin/pip install py-spy")
        argv = [py_spy, "record", "--pid", str(self.pid), "--format", "raw", "--rate", "100"]
        argv += ["--subprocesses", "--nonblocking", "--output", str(self.out)]
        self.process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(1.0)  # py-spy attaches before the first batch is sent
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)


def summarize_profile(path: Path, top: int = 15) -> dict[str, object]:
    """Own and inclusive sample shares per function from py-spy's collapsed stacks."""
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = [re.sub(r":\d+\)$", ")", f) for f in stack.split(";")]
        total += int(count)
        own[frames[-1]] += int(count)
        for frame in set(frames):
            inclusive[frame] += int(count)

    def shares(counter: Counter[str]) -> list[tuple[str, float]]:
        return [(f, round(n / total, 3)) for f, n in counter.most_common(top)]

    return {"samples": total, "own": shares(own), "inclusive": shares(inclusive)} if total else {"samples": 0}


# --- the products ----------------------------------------------------------------------------


@dataclass
class Window:
    """The hour-long query range: it ends just after the workload's last span."""

    start: float
    end: float

    def iso(self) -> tuple[str, str]:
        return tuple(datetime.fromtimestamp(t, UTC).isoformat() for t in (self.start, self.end))  # type: ignore[return-value]


class Product(abc.ABC):
    """One product under test: how to start it and how to ask it the benchmark's questions."""

    name = ""
    health_path = "/"
    database_entries: tuple[str, ...] = ()  # data-directory entries that hold the stored spans

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.client: httpx.Client | None = None

    @property
    def data_dir(self) -> Path:
        """Where the product keeps its data: fed by this run, or by an earlier one (``--workdir``)."""
        return self.workdir / f"{self.name}-data"

    def connect(self, server: Server) -> None:
        self.client = httpx.Client(base_url=server.base_url, headers=server.headers, timeout=300)

    def close(self) -> None:
        if self.client is not None:
            self.client.close()

    def get_json(self, path: str, **params: object) -> object:
        response = self.client.get(path, params=params)  # type: ignore[union-attr]
        if response.status_code in (401, 403):
            raise AccessDenied(
                f"{self.name} GET {path} refused the key ({response.status_code}): {response.text[:300]}"
            )
        if response.status_code != 200:
            raise BenchError(f"{self.name} GET {path} answered {response.status_code}: {response.text[:300]}")
        return response.json()

    @abc.abstractmethod
    def start(self) -> Server:
        """Each product's own way."""

    @abc.abstractmethod
    def span_count(self) -> int:
        """Each product's own way."""

    @abc.abstractmethod
    def questions(self, window: Window, trace_id: str) -> dict[str, Callable[[], object]]:
        """Each product's own way."""


class Agentwatch(Product):
    """The collector as a user runs it: ``agentwatch collector`` on embedded chDB."""

    name = "agentwatch"
    health_path = "/metrics"  # answers once the app has started, without a key
    database_entries = ("chdb",)  # the rest: the spool (a write-ahead log), key files

    def __init__(self, workdir: Path, env: dict[str, str] | None = None) -> None:
        super().__init__(workdir)
        self.auth = ""
        self.env = env or {}

    def _cli(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "agentwatch", *args]

    def _api_key(self, data_dir: Path) -> str | None:
        done = subprocess.run(
            # ingest for the spans, read for the questions and the stored-span count (collector.auth.scopes)
            self._cli("keys", "create", "--project", "bench", "--scope", "ingest,read", "--data-dir", str(data_dir)),
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        lines = done.stdout.strip().splitlines()
        return lines[-1].strip() if done.returncode == 0 and lines else None

    def start(self) -> Server:
        data_dir = self.data_dir
        data_dir.mkdir(exist_ok=True)
        port = free_port()
        env = {"AGENTWATCH_GRPC_PORT": "0", **self.env}
        key = self._api_key(data_dir)
        self.auth = (
            "project API key (agentwatch keys create)" if key else "AGENTWATCH_REQUIRE_AUTH=false (keys create failed)"
        )
        if key is None:
            env["AGENTWATCH_REQUIRE_AUTH"] = "false"
        argv = self._cli("collector", "--data-dir", str(data_dir), "--port", str(port), "--host", "127.0.0.1")
        server = start_server(self.name, argv, env, port, data_dir, self.workdir)
        server.headers = {"Authorization": f"Bearer {key}"} if key else {}
        return server

    def span_count(self) -> int:
        return int(self.get_json("/api/ingest")["stored_spans"])  # type: ignore[index]

    def _overview(self, window: Window) -> dict[str, dict[str, float | None]]:
        return self.get_json("/api/overview", start=window.start, end=window.end)["figures"]  # type: ignore[index]

    def questions(self, window: Window, trace_id: str) -> dict[str, Callable[[], object]]:
        def tokens() -> object:
            f = self._overview(window)
            return int((f["input_tokens"]["value"] or 0) + (f["output_tokens"]["value"] or 0))

        def errors() -> object:
            f = self._overview(window)
            return round((f["tool_calls"]["value"] or 0) * (f["tool_failure_rate"]["value"] or 0))

        def latency() -> object:
            f = self._overview(window)
            return [f["run_latency_p50"]["value"], f["run_latency_p95"]["value"]]

        def runs() -> object:
            return int(self._overview(window)["runs"]["value"] or 0)

        def trace() -> object:
            return len(self.get_json(f"/api/runs/{trace_id}")["spans"])  # type: ignore[index]

        return {
            "span_count": self.span_count,
            "run_count": runs,
            "total_tokens": tokens,
            "error_count": errors,
            "latency_p50_p95": latency,
            "whole_trace": trace,
        }


class Phoenix(Product):
    """Arize Phoenix as its docs start it: ``phoenix serve`` with a SQLite working directory."""

    name = "phoenix"
    health_path = "/healthz"
    database_entries = ("phoenix.db",)  # with its -wal/-shm files while they exist

    def __init__(self, workdir: Path, python: Path) -> None:
        super().__init__(workdir)
        self.python = python
        self._project_id = ""

    def start(self) -> Server:
        data_dir = self.data_dir
        data_dir.mkdir(exist_ok=True)
        port = free_port()
        env = {
            "PHOENIX_WORKING_DIR": str(data_dir),
            "PHOENIX_HOST": "127.0.0.1",
            "PHOENIX_PORT": str(port),
            "PHOENIX_GRPC_PORT": str(free_port()),
            "PHOENIX_TELEMETRY_ENABLED": "false",
        }
        argv = [str(self.python), "-m", "phoenix.server.main", "serve"]
        return start_server(self.name, argv, env, port, data_dir, self.workdir)

    def graphql(self, query: str, **variables: object) -> dict[str, object]:
        response = self.client.post("/graphql", json={"query": query, "variables": variables})  # type: ignore[union-attr]
        body = response.json() if response.status_code == 200 else {}
        if response.status_code != 200 or body.get("errors"):
            raise BenchError(f"phoenix GraphQL answered {response.status_code}: {response.text[:300]}")
        return body["data"]

    def project_id(self) -> str:
        if not self._project_id:
            data = self.graphql("{ projects { edges { node { id name } } } }")
            ids = [e["node"]["id"] for e in data["projects"]["edges"] if e["node"]["name"] == "bench"]  # type: ignore[index]
            if not ids:
                raise BenchError("phoenix has no project 'bench' yet")
            self._project_id = ids[0]
        return self._project_id

    def project_field(self, selection: str, window: Window | None = None) -> dict[str, object]:
        args = "($id: ID!, $tr: TimeRange)" if window else "($id: ID!)"
        query = f"query{args} {{ node(id: $id) {{ ... on Project {{ {selection} }} }} }}"
        variables: dict[str, object] = {"id": self.project_id()}
        if window:
            start, end = window.iso()
            variables["tr"] = {"start": start, "end": end}
        return self.graphql(query, **variables)["node"]  # type: ignore[return-value]

    def span_count(self) -> int:
        return int(self.project_field("recordCount")["recordCount"])  # type: ignore[arg-type]

    def questions(self, window: Window, trace_id: str) -> dict[str, Callable[[], object]]:
        def count() -> object:
            return self.project_field("recordCount(timeRange: $tr)", window)["recordCount"]

        def runs() -> object:
            return self.project_field("traceCount(timeRange: $tr)", window)["traceCount"]

        def tokens() -> object:
            return int(self.project_field("tokenCountTotal(timeRange: $tr)", window)["tokenCountTotal"])  # type: ignore[arg-type]

        def errors() -> object:
            sel = "recordCount(timeRange: $tr, filterCondition: \"status_code == 'ERROR'\")"
            return self.project_field(sel, window)["recordCount"]

        def latency() -> object:
            sel = "p50: latencyMsQuantile(probability: 0.5, timeRange: $tr) p95: latencyMsQuantile(probability: 0.95, timeRange: $tr)"
            node = self.project_field(sel, window)
            return [node["p50"] / 1000, node["p95"] / 1000]  # type: ignore[operator]

        def trace() -> object:
            body = self.get_json("/v1/projects/bench/spans", trace_id=trace_id, limit=1000)
            return len(body["data"])  # type: ignore[index]

        return {
            "span_count": count,
            "run_count": runs,
            "total_tokens": tokens,
            "error_count": errors,
            "latency_p50_p95": latency,
            "whole_trace": trace,
        }


# --- one product, end to end -----------------------------------------------------------------


def time_question(ask: Callable[[], object], repeats: int) -> dict[str, object]:
    """The first call (cold: no cached answer), then median and p95 of ``repeats`` repeated calls.

    Repeats can be answered from a product's result cache (agentwatch's embedded store keeps
    answers until its next write), so the first call is reported on its own as well.
    """
    try:
        start = time.perf_counter()
        answer = ask()  # first call, and the answer that is checked
        first_s = time.perf_counter() - start
        samples = []
        for _ in range(repeats):
            start = time.perf_counter()
            ask()
            samples.append(time.perf_counter() - start)
    except (BenchError, httpx.HTTPError, KeyError, TypeError) as exc:
        return {"error": f"{type(exc).__name__}: {exc}", "first_s": None, "median_s": None, "p95_s": None}
    samples.sort()
    p95 = samples[min(len(samples) - 1, round(0.95 * (len(samples) - 1)))]
    return {"answer": answer, "first_s": first_s, "median_s": statistics.median(samples), "p95_s": p95}


def expected_answers(workload: Workload) -> dict[str, object]:
    t = workload.totals
    return {
        "span_count": t.spans,
        "run_count": t.traces,
        "total_tokens": t.total_tokens,
        "error_count": t.error_spans,
        "whole_trace": workload.first_trace_spans,
    }


def measure(
    product: Product, workload: Workload, args: argparse.Namespace, *, profile: Path | None = None
) -> dict[str, object]:
    """Starts the product, ingests, asks, stops, measures disk; returns its figures.

    A product whose data directory holds the workload already (``--workdir``: an earlier run,
    or ``bench/compare_phoenix_fill.py``) is not fed again: it is restarted on that data and
    asked the questions, so its first calls are the first after a restart, and ``ingest`` is
    None. With ``profile``, py-spy samples the server during ingest and during the questions,
    and both summaries are included.
    """
    reused = product.data_dir.exists()
    server = product.start()
    extra: dict[str, object] = {}
    end_s = workload.totals.end_ns / 1e9 + 300
    try:
        wait_ready(server, product.health_path, args.start_timeout)
        product.connect(server)
        rss_idle = tree_memory_bytes(server.process.pid)[0]
        if reused:
            result = None
            stored = wait_queryable(product.span_count, workload.totals.spans, args.start_timeout)
        else:
            result = _phase(
                "ingest", server, profile, extra,
                lambda: ingest(product, server, workload, args.senders, args.queryable_timeout),
            )  # fmt: skip
            stored = result.queryable
        asks = product.questions(Window(end_s - 3600, end_s), workload.first_trace_id)
        questions = _phase(
            "queries", server, profile, extra,
            lambda: {name: time_question(ask, args.repeats) for name, ask in asks.items()},
        )  # fmt: skip
    finally:
        product.close()
        peak, peak_anon = stop_server(server)
    disk = disk_bytes(server.data_dir)
    breakdown = disk_breakdown(server.data_dir)
    database = sum(n for name, n in breakdown.items() if name.startswith(product.database_entries))
    return {
        "ingest": None
        if result is None
        else {
            **asdict(result),
            "accepted_spans_per_s": result.accepted_spans_per_s,
            "e2e_spans_per_s": result.e2e_spans_per_s,
        },
        "reused_data": reused,
        "stored_spans": stored,
        "complete": stored >= workload.totals.spans,
        "questions": questions,
        "answers_correct": _check(questions, expected_answers(workload)),
        "rss_idle_bytes": rss_idle,
        "peak_rss_bytes": peak,
        "peak_anon_bytes": peak_anon,
        "disk_bytes": disk,
        "disk_bytes_per_span": disk / max(1, stored),
        "disk_breakdown": breakdown,
        "database_bytes_per_span": database / max(1, stored),
        **extra,
    }


def disk_breakdown(data_dir: Path) -> dict[str, int]:
    """Bytes per top-level entry of a data directory (database, write-ahead log, keys...)."""
    return {entry.name: disk_bytes(entry) for entry in sorted(data_dir.iterdir())}


def _check(questions: dict[str, dict[str, object]], expected: dict[str, object]) -> dict[str, bool]:
    return {name: questions[name].get("answer") == want for name, want in expected.items() if name in questions}


# --- SDK overhead ----------------------------------------------------------------------------


class _Sink(BaseHTTPRequestHandler):
    """Accepts any OTLP export with an empty success body, so exporters run but cost no server."""

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (base signature)
        return None


def sdk_overhead(args: argparse.Namespace, phoenix_python: Path | None) -> dict[str, object]:
    sink = ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    threading.Thread(target=sink.serve_forever, name="otlp-sink", daemon=True).start()
    endpoint = f"http://127.0.0.1:{sink.server_address[1]}"
    script = str(REPO / "bench" / "compare_sdk.py")
    runs = [("agentwatch", Path(sys.executable)), ("otel", Path(sys.executable))]
    if phoenix_python:
        runs.append(("phoenix", phoenix_python))
    out: dict[str, object] = {
        "iterations": args.sdk_iterations,
        "endpoint": "local sink (200, empty body)",
    }
    try:
        for mode, python in runs:
            out[mode] = _run_overhead(python, script, mode, endpoint, args.sdk_iterations)
    finally:
        sink.shutdown()
        sink.server_close()
    return out


def _run_overhead(python: Path, script: str, mode: str, endpoint: str, iterations: int) -> dict[str, object]:
    done = subprocess.run(
        [str(python), script, mode, endpoint, str(iterations)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
    )
    if done.returncode != 0:
        return {"error": (done.stderr or done.stdout).strip().splitlines()[-1:]}
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["overhead_us"] = (result["traced_s"] - result["bare_s"]) * 1e6
    return result


# --- machine, versions, report ---------------------------------------------------------------


def machine() -> dict[str, object]:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    mem_kb = int(
        next(line.split()[1] for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal"))
    )
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "ram_gib": round(mem_kb / 1024**2, 1),
        "os": platform.platform(),
        "python": platform.python_version(),
        "load_avg_1m_at_start": round(os.getloadavg()[0], 2),
    }


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def phoenix_version(python: Path) -> str | None:
    """Phoenix's version in its own virtualenv, or None when it cannot be imported there."""
    if not python.exists():
        return None
    done = subprocess.run(
        [str(python), "-c", "import phoenix; print(phoenix.__version__)"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    return done.stdout.strip() if done.returncode == 0 else None


def _ratio(num: float | None, den: float | None) -> float | None:
    return num / den if num and den else None


def compare(aw: dict[str, object], px: dict[str, object]) -> dict[str, dict[str, object]]:
    """The four target ratios, each with its threshold and whether it was met."""
    q_aw, q_px = aw["questions"], px["questions"]
    per_question = {q: _ratio(q_px[q]["median_s"], q_aw[q]["median_s"]) for q in QUESTIONS}  # type: ignore[index]
    first_calls = first_call_ratios(aw, px)
    fed = not aw.get("reused_data") and not px.get("reused_data")  # peaks of an ingest on both sides
    ratios = {
        "ingest_e2e": _ratio(_ingest(aw, "e2e_spans_per_s"), _ingest(px, "e2e_spans_per_s")),
        "aggregate_queries": min((per_question[q] for q in AGGREGATES if per_question[q]), default=None),
        "first_call_aggregates": min((r for r in first_calls.values() if r), default=None),
        "disk_per_span": _ratio(px["disk_bytes_per_span"], aw["disk_bytes_per_span"]),  # type: ignore[arg-type]
        "peak_rss": _ratio(aw["peak_rss_bytes"], px["peak_rss_bytes"]) if fed else None,  # type: ignore[arg-type]
    }
    out: dict[str, dict[str, object]] = {}
    for name, (text, op, threshold) in TARGETS.items():
        r = ratios[name]
        met = None if r is None else (r >= threshold if op == ">=" else r <= threshold)
        out[name] = {"description": text, "ratio": r, "target": f"{op} {threshold:g}", "met": met}
    out["aggregate_queries"]["per_question"] = per_question
    out["first_call_aggregates"]["per_question"] = first_calls
    out["peak_anon"] = {
        "description": "server peak anonymous memory (RSS less mapped files), agentwatch / Phoenix",
        "ratio": _ratio(aw["peak_anon_bytes"], px["peak_anon_bytes"]),
    }  # type: ignore[arg-type]
    out["database_per_span"] = {
        "description": "database bytes per span (data directory less write-ahead log), Phoenix / agentwatch",
        "ratio": _ratio(px["database_bytes_per_span"], aw["database_bytes_per_span"]),
    }  # type: ignore[arg-type]
    out["ingest_accepted"] = {
        "description": "accepted spans/s, agentwatch / Phoenix",
        "ratio": _ratio(_ingest(aw, "accepted_spans_per_s"), _ingest(px, "accepted_spans_per_s")),
    }
    return out


def _ingest(figures: dict[str, object], name: str) -> float | None:
    """An ingest figure, None where the product was restarted on earlier data (not fed)."""
    ingest = figures.get("ingest")
    return ingest.get(name) if isinstance(ingest, dict) else None


def first_call_ratios(aw: dict[str, object], px: dict[str, object]) -> dict[str, float | None]:
    """Phoenix's first call of each aggregate question over agentwatch's first overview call.

    agentwatch answers all four from one overview (the first asked pays, the others read its
    result), Phoenix each from a GraphQL field of its own; so each Phoenix first call is set
    against the dearest of agentwatch's four first calls, which is the overview's."""
    firsts = [aw["questions"][q].get("first_s") for q in AGGREGATES]  # type: ignore[index]
    overview = max((f for f in firsts if f), default=None)
    return {q: _ratio(px["questions"][q].get("first_s"), overview) for q in AGGREGATES}  # type: ignore[index]


def _fmt(value: object, unit: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, int | float) and not isinstance(value, bool):
        text = f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"
    else:
        text = str(value)
    return f"{text}{unit}"


def _ms(question: dict[str, object], key: str) -> object:
    if question.get("error"):
        return "error"
    value = question.get(key)
    return None if value is None else value * 1000  # type: ignore[operator]


def table_rows(result: dict[str, object]) -> list[tuple[str, str, str, str]]:
    """(figure, agentwatch, Phoenix, ratio) rows for the printed and the Markdown table."""
    aw, px = result["products"]["agentwatch"], result["products"].get("phoenix", {})  # type: ignore[index,union-attr]
    ratios = result.get("ratios", {})
    pm = px.get("measured", False)
    rows = []

    def row(label: str, get: Callable[[dict], object], unit: str = "", ratio: object = None) -> None:
        rows.append(
            (
                label,
                _fmt(get(aw), unit),
                _fmt(get(px), unit) if pm else "not measured",
                _fmt(ratio, "x"),
            )
        )

    row(
        "accepted spans/s",
        lambda p: _ingest(p, "accepted_spans_per_s"),
        "",
        ratios.get("ingest_accepted", {}).get("ratio"),
    )
    row(
        "end-to-end spans/s",
        lambda p: _ingest(p, "e2e_spans_per_s"),
        "",
        ratios.get("ingest_e2e", {}).get("ratio"),
    )
    row(
        "peak RSS (MiB)",
        lambda p: p["peak_rss_bytes"] / 2**20,
        "",
        ratios.get("peak_rss", {}).get("ratio"),
    )
    row(
        "peak RssAnon (MiB)",
        lambda p: p["peak_anon_bytes"] / 2**20,
        "",
        ratios.get("peak_anon", {}).get("ratio"),
    )
    row(
        "disk bytes/span",
        lambda p: p["disk_bytes_per_span"],
        "",
        ratios.get("disk_per_span", {}).get("ratio"),
    )
    row(
        "  of which database",
        lambda p: p["database_bytes_per_span"],
        "",
        ratios.get("database_per_span", {}).get("ratio"),
    )
    per_q = ratios.get("aggregate_queries", {}).get("per_question", {})
    first_q = ratios.get("first_call_aggregates", {}).get("per_question", {})
    for q in QUESTIONS:
        ratio = per_q.get(q)
        row(f"{q} median ms", lambda p, q=q: _ms(p["questions"][q], "median_s"), "", ratio)
        row(f"{q} p95 ms", lambda p, q=q: _ms(p["questions"][q], "p95_s"))
        row(f"{q} first call ms", lambda p, q=q: _ms(p["questions"][q], "first_s"), "", first_q.get(q))
    return rows


def first_calls_by_size(results: Path) -> list[dict[str, object]]:
    """The first calls of the aggregate questions at each workload size, from the side-by-side
    results in ``results`` (``compare*.json``): per size, the latest run that measured Phoenix,
    else the latest of agentwatch alone."""
    best: dict[int, tuple[tuple[bool, str], dict[str, object]]] = {}
    for path in sorted(results.glob("compare*.json")):
        try:
            result = json.loads(path.read_text())
            row = _first_call_row(path.name, result)
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if row is None:
            continue
        rank = (row["phoenix_ms"] is not None, str(result.get("started_at")))
        if row["spans"] not in best or rank > best[row["spans"]][0]:  # type: ignore[operator]
            best[row["spans"]] = (rank, row)  # type: ignore[index]
    return [best[spans][1] for spans in sorted(best)]


def _first_call_row(name: str, result: dict[str, object]) -> dict[str, object] | None:
    aw, px = result["products"]["agentwatch"], result["products"].get("phoenix", {})  # type: ignore[index,union-attr]
    firsts = [aw["questions"][q].get("first_s") for q in AGGREGATES]
    if not all(firsts):
        return None  # a run from before first calls were recorded, or one whose question failed
    measured = px.get("measured", False)
    phoenix = [px["questions"][q].get("first_s") for q in AGGREGATES] if measured else None
    return {
        "spans": result["workload"]["spans"],  # type: ignore[index]
        "file": name,
        "started_at": result.get("started_at"),
        "load": result["machine"].get("load_avg_1m_at_start"),  # type: ignore[index]
        "agentwatch_ms": max(firsts) * 1000,
        "agentwatch_fed": not aw.get("reused_data"),
        "phoenix_ms": None if phoenix is None else [(f or 0) * 1000 for f in phoenix],
        "phoenix_fed": measured and not px.get("reused_data"),
        "ratio": result.get("ratios", {}).get("first_call_aggregates", {}).get("ratio"),  # type: ignore[union-attr]
        "sum_ratio": _ratio(sum(f or 0 for f in phoenix), sum(firsts)) if phoenix else None,
    }


def _first_call_lines(sizes: list[dict[str, object]]) -> list[str]:
    lines = [
        "",
        "First calls of the aggregate questions by size (ms; agentwatch: its first overview call, which answers "
        "all four; Phoenix: run count / tokens / errors / latency, one GraphQL field each). 'after ingest': the "
        "first call once the run's own ingest was queryable; 'after restart': the server restarted on data "
        "filled earlier (the result file's notes say how).",
        "",
        "| spans | agentwatch | Phoenix | Phoenix / agentwatch: least, all four summed | run at (1-min load) | result |",
        "|---:|---:|---:|---:|---|---|",
    ]
    for r in sizes:
        aw = f"{_fmt(r['agentwatch_ms'])} ({'after ingest' if r['agentwatch_fed'] else 'after restart'})"
        px = r["phoenix_ms"]
        px_text = "not measured" if px is None else " / ".join(_fmt(v) for v in px)  # type: ignore[union-attr]
        if px is not None:
            px_text += f" ({'after ingest' if r['phoenix_fed'] else 'after restart'})"
        lines.append(
            f"| {r['spans']:,} | {aw} | {px_text} | {_fmt(r['ratio'], 'x')}, {_fmt(r['sum_ratio'], 'x')} "
            f"| {r['started_at']} ({r['load']}) | {r['file']} |"
        )
    return lines


def render_table(result: dict[str, object]) -> str:
    rows = [("figure", "agentwatch", "Phoenix", "ratio"), *table_rows(result)]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    return "\n".join(
        "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
        for r in rows
    )


def render_markdown(result: dict[str, object], sizes: list[dict[str, object]] | None = None) -> str:
    """The result as Markdown; ``sizes`` (``first_calls_by_size``) adds the first calls by size."""
    m, w = result["machine"], result["workload"]  # type: ignore[index]
    lines = [
        "# agentwatch vs Arize Phoenix, side by side",
        "",
        f"Command: `{result['command']}`  ",
        f"Run at {result['started_at']} on {m['cpu']}, {m['cores']} cores, {m['ram_gib']} GiB RAM, {m['os']}; "
        f"1-minute load average {m.get('load_avg_1m_at_start')} at start, {result.get('load_avg_1m_at_end')} at end.  ",  # type: ignore[index]
        f"Versions: {', '.join(f'{k} {v}' for k, v in result['versions'].items())}.  ",  # type: ignore[union-attr]
        f"Workload: {w['spans']:,} spans in {w['traces']:,} traces, {w['batches']} OTLP/protobuf batches, "  # type: ignore[index]
        f"{w['request_bytes'] / 2**20:.1f} MiB on the wire, {w['content_bytes'] / 2**20:.1f} MiB of captured text, seed {w['seed']}.  ",  # type: ignore[index]
        f"agentwatch auth: {result['agentwatch_auth']}; settings: {result.get('agentwatch_settings', 'defaults')}.",
        "",
        "| figure | agentwatch | Phoenix | ratio |",
        "|---|---:|---:|---:|",
        *(f"| {a} | {b} | {c} | {d} |" for a, b, c, d in table_rows(result)),
        "",
        "| target | ratio | required | met |",
        "|---|---:|---:|---|",
    ]
    for name in TARGETS:
        t = result.get("ratios", {}).get(name)  # type: ignore[union-attr]
        met = "not measured" if t is None or t["met"] is None else ("met" if t["met"] else "MISSED")
        lines.append(
            f"| {TARGETS[name][0]} | {_fmt(t and t['ratio'], 'x')} | {TARGETS[name][1]} {TARGETS[name][2]:g} | {met} |"
        )
    if sizes:
        lines += _first_call_lines(sizes)
    lines += ["", *result["notes"]]  # type: ignore[list-item]
    lines += _profile_lines(result["products"]["agentwatch"])  # type: ignore[index]
    sdk = result.get("sdk_overhead")
    if sdk:
        lines += ["", "SDK overhead per call of an empty traced function (best of 5 rounds):", ""]
        lines += [
            f"- {k}: {_fmt(v.get('overhead_us'), ' µs')}" + (f" (error: {v['error']})" if "error" in v else "")
            for k, v in sdk.items()
            if isinstance(v, dict)
        ]  # type: ignore[union-attr]
    return "\n".join(lines) + "\n"


def _profile_lines(figures: dict[str, object]) -> list[str]:
    """The top of each py-spy profile (own time per function), when the run took one."""
    lines: list[str] = []
    for phase in ("ingest", "queries"):
        profile = figures.get(f"{phase}_profile")
        if not profile or not profile.get("samples"):  # type: ignore[union-attr]
            continue
        lines += [
            "",
            f"agentwatch collector, {phase}: py-spy own-time share ({profile['samples']} samples, {profile['file']}):",
            "",
        ]  # type: ignore[index]
        lines += [f"- {share:.1%} {frame}" for frame, share in profile["own"][:10]]  # type: ignore[index]
    return lines


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bench.compare", description=__doc__.split("\n\n")[0])
    parser.add_argument("--spans", type=int, default=DEFAULT_SPANS, help="spans in the workload (default 50k)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--batch-spans", type=int, default=1000, help="spans per OTLP request")
    parser.add_argument("--senders", type=int, default=2, help="concurrent sending threads")
    parser.add_argument("--repeats", type=int, default=20, help="timed calls per question")
    parser.add_argument("--agentwatch-only", action="store_true", help="do not start Phoenix")
    parser.add_argument(
        "--phoenix-python",
        type=Path,
        default=DEFAULT_PHOENIX_PYTHON,
        help="python of the virtualenv with arize-phoenix",
    )
    parser.add_argument(
        "--sdk-iterations",
        type=int,
        default=20_000,
        help="calls per SDK-overhead round (0 skips it)",
    )
    parser.add_argument(
        "--agentwatch-env",
        action="append",
        default=[],
        metavar="AGENTWATCH_NAME=VALUE",
        help="collector setting for this run (repeatable), e.g. AGENTWATCH_REDACT_PATTERNS=none",
    )
    parser.add_argument("--profile", action="store_true", help="py-spy agentwatch's collector during ingest")
    parser.add_argument(
        "--workdir",
        type=Path,
        default=None,
        help="keep the products' data in DIR (default: a temporary directory). DIR/workload.json fixes the "
        "workload; a product whose data is in DIR already is restarted on it and only asked the questions",
    )
    parser.add_argument(
        "--unique-spans",
        type=int,
        default=None,
        help="spans in the workload's pool, repeated with new trace ids up to --spans "
        "(default: all unique when Phoenix is measured, else 200k)",
    )
    parser.add_argument("--end-time-ns", type=int, default=None, help="the workload's last span end (default: now)")
    parser.add_argument("--start-timeout", type=float, default=300.0)
    parser.add_argument(
        "--queryable-timeout",
        type=float,
        default=3600.0,
        help="seconds to wait for every span to be queryable",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="result path without suffix (default bench/results/compare[_agentwatch_N])",
    )
    return parser.parse_args(argv)


def _workload_info(workload: Workload, args: argparse.Namespace) -> dict[str, object]:
    t = workload.totals
    return {
        **asdict(t),
        "total_tokens": t.total_tokens,
        "seed": args.seed,
        "batches": workload.batch_count,
        "request_bytes": workload.request_bytes,
        "passes": workload.passes,
    }


def workload_spec(args: argparse.Namespace, phoenix: bool) -> dict[str, int]:
    """The workload's arguments: from the command line, or those ``--workdir`` was filled with
    (``workload.json``, written by its first run), so a later run asks about the same spans."""
    spec = {
        "spans": args.spans,
        "seed": args.seed,
        "batch_spans": args.batch_spans,
        # Phoenix needs globally unique span ids, unless it is filled beforehand (compare_phoenix_fill)
        "unique_spans": args.unique_spans or (args.spans if phoenix else 200_000),
        "end_time_ns": args.end_time_ns or time.time_ns(),
    }
    if args.workdir is None:
        return spec
    path = args.workdir / "workload.json"
    if not path.exists():
        args.workdir.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(spec, indent=2) + "\n")
        return spec
    kept = json.loads(path.read_text())
    if (kept["spans"], kept["seed"]) != (args.spans, args.seed):
        raise BenchError(
            f"{args.workdir} holds the workload of --spans {kept['spans']} --seed {kept['seed']}; "
            "ask about that one or use another --workdir"
        )
    return kept


def run(args: argparse.Namespace) -> dict[str, object]:
    px_version = None if args.agentwatch_only else phoenix_version(args.phoenix_python)
    spec = workload_spec(args, px_version is not None)
    print(f"generating {args.spans:,} spans (seed {args.seed}) ...", flush=True)
    workload = Workload(
        spec["spans"],
        seed=spec["seed"],
        batch_spans=spec["batch_spans"],
        end_time_ns=spec["end_time_ns"],
        unique_spans=spec["unique_spans"],
    )
    notes = [
        "Latency quantiles are of run (root span) durations; agentwatch's API serves p50/p95, so both are asked p50/p95.",
        "Span count: agentwatch's API answers it from the collector's stored-span counter (/api/ingest), "
        "Phoenix with a COUNT over its spans table, so it is shown but not part of the aggregate target; "
        "run count is the counted aggregate asked of both.",
        "Disk is the whole data directory after a clean stop, as du counts it; for agentwatch that includes "
        "its spool, a write-ahead log of request bodies (segments are deleted once stored), and the "
        "'of which database' row is chdb/ only (Phoenix: phoenix.db*). The target is judged on the whole directory.",
        "Repeated calls can be answered from agentwatch's result cache (embedded store, emptied on every "
        "write); the first call of each question is shown separately. The overview answers several "
        "questions at once, so only the first question asked of it pays for the query.",
        "agentwatch answers run count, tokens, errors and latency from /api/overview (every headline figure "
        "for the range and the previous range in one call); Phoenix from one GraphQL field each.",
    ]
    versions = {
        "agentwatch": _version("agentwatch-platform"),
        "chdb-core": _version("chdb-core"),
        "arize-phoenix": px_version or "not installed",
    }
    result: dict[str, object] = {
        "command": " ".join(["python -m bench.compare", *map(shlex.quote, sys.argv[1:])]),
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(), "versions": versions, "workload": _workload_info(workload, args), "notes": notes,
        "products": {},
    }  # fmt: skip
    if "phoenix_fill" in spec:
        notes.append(f"Phoenix's database was filled beforehand: {spec['phoenix_fill']}")
    with _workdir(args) as tmp:
        aw = Agentwatch(tmp, _env_pairs(args.agentwatch_env))
        print(f"agentwatch: {'restarting on its data' if aw.data_dir.exists() else 'ingesting'} ...", flush=True)
        profile = args.profile and _out_path(args).with_name(_out_path(args).name + "_profile.txt")
        figures = measure(aw, workload, args, profile=profile or None)
        _note_failures("agentwatch", figures, notes)
        result["products"]["agentwatch"] = {"measured": True, **figures}  # type: ignore[index]
        result["agentwatch_auth"] = aw.auth
        result["agentwatch_settings"] = aw.env or "defaults"
        result["products"]["phoenix"] = _phoenix(workload, args, tmp, px_version, notes)  # type: ignore[index]
    for product, figures in result["products"].items():  # type: ignore[attr-defined]
        if figures.get("reused_data"):
            notes.append(
                f"{product} was not fed by this run: it was restarted on the data an earlier run left in "
                f"{args.workdir}, so its first calls are the first after a restart, and it has no ingest figures."
            )
    if result["products"]["phoenix"]["measured"]:  # type: ignore[index]
        result["ratios"] = compare(result["products"]["agentwatch"], result["products"]["phoenix"])  # type: ignore[index,arg-type]
    result["load_avg_1m_at_end"] = round(os.getloadavg()[0], 2)
    if args.sdk_iterations:
        result["sdk_overhead"] = sdk_overhead(args, args.phoenix_python if px_version else None)
    return result


def _phoenix(
    workload: Workload, args: argparse.Namespace, tmp: Path, version: str | None, notes: list[str]
) -> dict[str, object]:
    if args.agentwatch_only:
        return {"measured": False, "reason": "--agentwatch-only"}
    if version is None:
        reason = f"arize-phoenix not importable with {args.phoenix_python} (install the 'bench' extra into .venv-bench)"
        print(f"Phoenix not measured: {reason}", flush=True)
        notes.append(f"Phoenix was NOT measured: {reason}. No Phoenix figures exist for this run.")
        return {"measured": False, "reason": reason}
    phoenix = Phoenix(tmp, args.phoenix_python)
    if not phoenix.data_dir.exists() and workload.passes > 1:
        raise BenchError(
            f"Phoenix keys a span by its span id alone, and this workload repeats a pool of "
            f"{workload.totals.spans // workload.passes:,} spans: fill {phoenix.data_dir} first "
            f"(bench/compare_phoenix_fill.py) or use --unique-spans {workload.totals.spans}"
        )
    print(
        f"phoenix {version}: {'restarting on its data' if phoenix.data_dir.exists() else 'ingesting (this takes minutes)'} ...",
        flush=True,
    )
    notes.append("Phoenix runs with its defaults (SQLite in PHOENIX_WORKING_DIR, auth off).")
    figures = measure(phoenix, workload, args)
    _note_failures("Phoenix", figures, notes)
    return {"measured": True, **figures}


@contextlib.contextmanager
def _workdir(args: argparse.Namespace) -> Iterator[Path]:
    """``--workdir``, kept; else a temporary directory, removed with all it holds."""
    if args.workdir is not None:
        yield args.workdir
        return
    with tempfile.TemporaryDirectory(prefix="aw-compare-") as tmp:
        yield Path(tmp)


def _note_failures(product: str, figures: dict[str, object], notes: list[str]) -> None:
    """Puts every failed question, wrong answer and incomplete ingest into the result's notes."""
    if not figures["complete"]:
        notes.append(f"{product}: only {figures['stored_spans']} spans became queryable.")
    for name, q in figures["questions"].items():  # type: ignore[union-attr]
        if q.get("error"):
            notes.append(f"{product}: question {name} failed: {q['error']}")
    wrong = [name for name, ok in figures["answers_correct"].items() if not ok]  # type: ignore[union-attr]
    if wrong:
        notes.append(f"{product}: wrong or missing answers to {', '.join(wrong)} (see answers in the JSON).")


def _env_pairs(pairs: list[str]) -> dict[str, str]:
    """``--agentwatch-env NAME=VALUE`` arguments as a dict; a pair without ``=`` is an error."""
    bad = [p for p in pairs if "=" not in p or not p.startswith("AGENTWATCH_")]
    if bad:
        raise BenchError(f"--agentwatch-env expects AGENTWATCH_NAME=VALUE, got {bad}")
    return dict(p.split("=", 1) for p in pairs)


def _out_path(args: argparse.Namespace) -> Path:
    """Where results go, without suffix: ``compare`` for the side by side at the default size,
    ``compare_<spans>`` at another, ``compare_agentwatch_<spans>`` for agentwatch alone."""
    size = "" if args.spans == DEFAULT_SPANS and not args.agentwatch_only else f"_{args.spans}"
    out = args.out or RESULTS / f"compare{'_agentwatch' if args.agentwatch_only else ''}{size}"
    out.parent.mkdir(parents=True, exist_ok=True)
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        result = run(args)
    except BenchError as exc:
        print(f"bench.compare: {exc}", file=sys.stderr)
        return 1
    out = _out_path(args)
    out.with_suffix(".json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    sizes = first_calls_by_size(out.parent)
    out.with_suffix(".md").write_text(render_markdown(result, sizes))
    main_result = out.parent / "compare.json"  # its table of first calls by size gains this run's
    if main_result.exists() and main_result != out.with_suffix(".json"):
        main_result.with_suffix(".md").write_text(render_markdown(json.loads(main_result.read_text()), sizes))
    print(render_table(result))
    for name, t in result.get("ratios", {}).items():  # type: ignore[union-attr]
        if "met" in t:
            verdict = {True: "met", False: "MISSED", None: "not measured"}[t["met"]]
            print(f"target {name}: {_fmt(t['ratio'], 'x')} (required {t['target']}): {verdict}")
    for note in result["notes"]:  # type: ignore[union-attr]
        print(f"note: {note}")
    print(f"wrote {out.with_suffix('.json')} and {out.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
