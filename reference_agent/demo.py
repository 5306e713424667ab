"""``agentwatch demo``: the whole product on one machine, with traffic and a real cost spike.

It starts, as child processes, the collector on embedded chDB in ``--data-dir`` (with the
alert evaluator inside it, evaluating every few seconds, and the engine registered with its
scraper), the simulated engine and, when installed, the dashboard. Then simulated users run
the research agent in this process, traced by the SDK like any user's agent:

1. *baseline* (the first ~55% of ``--duration``): evolving-report runs, easy decisions
   routed to ``sim-small``; this gives the cost-spike detector its history;
2. *spike*: twice the users switch to long ReAct tasks (questions the simulated model reads
   five documents for) with every call on ``sim-large``, so the cost per minute really rises
   (each step re-sends the growing history to the expensive model).

Every cost lever acts during the baseline, so the Cost page shows a measured saving for each:
the tool cache and the engine's prefix cache, routing of the easy decisions to ``sim-small``, a
project-wide rate limiter that queues the baseline users' runs, and one more "frugal" user whose
agent has a small budget (its runs degrade to ``sim-small`` once 5 % of it is spent) and a
rate limiter that refuses its runs beyond one a minute.

Beside them, a long run (a minute or more, steps spaced out) and agents SIGKILLed mid-run
(``demo_live``) keep a running run and incomplete ones on the dashboard; the collector's run
idle timeout is a minute, half the traffic in a shorter demo, and the demo prints it.

The demo's alert rules (``demo_rules.yaml`` next to this module, evaluated every 2 s) are the
default cost rules with buckets of seconds instead of hours, so that the spike fires within a
40-second demo: the agent's cost per 5 s and its most expensive run per 10 s, each against a
baseline learned from the last few buckets. At the end it prints the runs recorded (from the
collector's ``/api/runs``) and one line per alert incident (from ``/api/alerts``; while it
runs, each incident is printed once when it fires and once when it resolves), then keeps the
collector, the engine and the dashboard serving (so that one can look around and run one's
own agent against them: it prints a ready ``export`` line) until Ctrl-C or SIGTERM stops
every child; ``--exit-when-done`` stops them at once instead. A child that dies is reported by
name with the end of its log. The data directory and its project key are reused by the next
run; children's logs are in ``<data-dir>/logs``. Starting and stopping the processes is
``reference_agent.supervisor``'s job and making the keys ``reference_agent.keys``'s: benchmarks
and tests use them too, without the OpenAI client that this module needs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import itertools
import os
import sys
import time
import urllib.parse
import warnings
import webbrowser
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from importlib.util import find_spec
from pathlib import Path
from typing import Any, TypeVar

import agentwatch

from agentwatch_api.client import CollectorClient, CollectorError
from agentwatch_api.labels import figure, metric_label
from agentwatch_api.schemas import AlertOut, LeverSaving
from agentwatch_platform.reference_agent import demo_live
from agentwatch_platform.reference_agent.agent import AgentConfig, ResearchAgent, make_client
from agentwatch_platform.reference_agent.engine.policy import docs_wanted
from agentwatch_platform.reference_agent.keys import DEMO_PROJECT, project_key
from agentwatch_platform.reference_agent.levers import DegradationPolicy, RateLimiter
from agentwatch_platform.reference_agent.loadgen import LoadConfig, LoadSummary, generate_load, make_questions
from agentwatch_platform.reference_agent.supervisor import (
    ProcessGroup,
    StackError,
    agentwatch_command,
    check_ports,
    handle_stop_signals,
    interrupts_ignored,
    stack_ports,
    start_collector,
    start_engine,
)
from agentwatch_platform.reference_agent.tools import Corpus, ResearchTools, ToolCache, ToolConfig

DEMO_RULES = Path(__file__).with_name("demo_rules.yaml")
BASELINE_SHARE = 0.55
# The spike is a release: the research agent 1.1 (ReAct on the large model) after 1.0 (routed,
# bounded context); the Versions page flags its cost per run and demo-release-cost-regression fires once.
BASELINE_VERSION, SPIKE_VERSION = "1.0", "1.1"
RECOVERY_S = 30.0  # baseline traffic again after the spike (at most half of --duration): incidents resolve on data
# The cost-rate rule's bucket (demo_rules.yaml): 10 s holds one incident through the spend of a
# few long ReAct runs; a short demo's baseline phase is too short to learn from 10 s buckets.
COST_WINDOW_ENV, SHORT_DEMO_S = "AGENTWATCH_DEMO_COST_WINDOW", 90.0
ALERT_INTERVAL_S = 2.0
FIRST_INCIDENT_S = max(15 * ALERT_INTERVAL_S, 30.0)  # after the traffic, the wait for a first incident, at most
DASHBOARD_URL_ENV = "AGENTWATCH_DEMO_DASHBOARD_URL"  # demo_rules.yaml's dashboard_url
SERVICE_NAME = "research-agent"
T = TypeVar("T")


class DemoError(StackError):
    """The demo cannot run as asked (its options); a port taken or a child that died is a ``StackError``."""


@dataclass(frozen=True)
class DemoOptions:
    duration_s: float = 180.0
    data_dir: Path = Path(".agentwatch/demo")
    open_browser: bool = True
    port_offset: int = 0
    users: int = 3
    engine_speed: float = 4.0
    exit_when_done: bool = False
    log: Callable[[str], None] = functools.partial(print, flush=True)

    @property
    def ports(self) -> dict[str, int]:
        return stack_ports(self.port_offset)


@dataclass
class DemoReport:
    runs_recorded: int
    alerts: list[AlertOut]
    phases: dict[str, LoadSummary] = field(default_factory=dict)
    savings: list[LeverSaving] = field(default_factory=list)  # /api/cost's saving per lever
    stopped_by_user: bool = False  # Ctrl-C while serving after the traffic: a normal end
    running: int = 0  # of the runs recorded: root not arrived yet
    incomplete: int = 0  # root never arrived (a killed agent), idle past the collector's timeout


def register_demo(sub: argparse._SubParsersAction) -> None:
    demo = sub.add_parser("demo", help="run collector, simulated engine, dashboard and traffic with a cost spike")
    demo.add_argument("--duration", type=float, default=180.0, help="seconds of traffic (default 180)")
    demo.add_argument("--data-dir", type=Path, default=Path(".agentwatch/demo"), help="reused between runs")
    demo.add_argument("--no-browser", action="store_true", help="do not open the dashboard in a browser")
    demo.add_argument(
        "--port-offset",
        type=int,
        default=0,
        help="add to every default port (collector 4318/4317, engine 8000, dashboard 8501)",
    )
    demo.add_argument("--users", type=int, default=3, help="simulated users in the baseline phase (default 3)")
    demo.add_argument(
        "--engine-speed",
        type=float,
        default=4.0,
        help="the simulated engine runs this many times faster than real time (default 4)",
    )
    demo.add_argument(
        "--exit-when-done",
        action="store_true",
        help="stop everything when the traffic ends (default: keep serving until Ctrl-C)",
    )
    demo.set_defaults(func=run_demo_command)


def run_demo_command(args: argparse.Namespace) -> int:
    os.environ.setdefault(
        COST_WINDOW_ENV, "5s" if args.duration < SHORT_DEMO_S else "10s"
    )  # the collector child inherits it
    options = DemoOptions(
        duration_s=args.duration,
        data_dir=args.data_dir,
        open_browser=not args.no_browser,
        port_offset=args.port_offset,
        users=args.users,
        engine_speed=args.engine_speed,
        exit_when_done=args.exit_when_done,
    )
    # Ctrl-C cancels the users' requests mid-connect: anyio's connect_tcp leaves a coroutine it
    # had not started yet, whose "never awaited" warning would print after the clean last line
    warnings.filterwarnings("ignore", message="coroutine .*try_connect.* was never awaited", category=RuntimeWarning)
    handle_stop_signals()  # SIGTERM stops like Ctrl-C: children first, then exit
    try:
        report = run_demo(options)
    except StackError as exc:
        print(f"agentwatch demo: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("agentwatch demo: interrupted; every child process was stopped", file=sys.stderr)
        return 130
    if report.stopped_by_user:
        print("agentwatch demo: stopped; every child process was stopped", file=sys.stderr)
    return 0 if report.runs_recorded else 1


def run_demo(options: DemoOptions) -> DemoReport:
    """Start the stack, drive the traffic, report, and always stop every child."""
    if options.duration_s < 10 or options.users < 1:
        raise DemoError("--duration must be at least 10 seconds and --users at least 1")
    check_ports(options.ports)
    options.data_dir.mkdir(parents=True, exist_ok=True)
    group = ProcessGroup(options.data_dir / "logs", options.log)
    try:
        urls, keys = _start_stack(group, options)
        report = asyncio.run(_drive(options, group, urls, keys))
        if not options.exit_when_done:
            report.stopped_by_user = _serve(group, urls, options.log)
        return report
    finally:
        with interrupts_ignored():  # a second Ctrl-C must not leave children behind
            agentwatch.shutdown(timeout_s=5.0)  # flush while the collector still runs
            group.stop()


# --- the stack --------------------------------------------------------------------------------


def _start_stack(group: ProcessGroup, options: DemoOptions) -> tuple[dict[str, str], tuple[str, str]]:
    """Collector first (the key comes from it), then the engine and the dashboard side by side."""
    ports, data_dir = options.ports, options.data_dir
    options.log(f"starting the collector, the simulated engine and the dashboard (logs in {data_dir / 'logs'})")
    engine = f"http://127.0.0.1:{ports['engine']}"
    collector = start_collector(
        group,
        data_dir,
        port=ports["collector"],
        grpc_port=ports["collector-grpc"],
        env={
            "AGENTWATCH_SCRAPE_TARGETS": f"sim-engine={engine}/metrics@{DEMO_PROJECT}",
            "AGENTWATCH_SCRAPE_INTERVAL_S": "2",
            "AGENTWATCH_ALERT_RULES": str(DEMO_RULES),
            DASHBOARD_URL_ENV: f"http://127.0.0.1:{ports['dashboard']}",  # the notifications' links
            "AGENTWATCH_ALERT_INTERVAL_S": str(ALERT_INTERVAL_S),
            "AGENTWATCH_DEMO_COST_MIN_DELTA": f"{0.01 * options.users:g}",
            demo_live.IDLE_TIMEOUT_ENV: f"{demo_live.idle_timeout_s(options.duration_s):g}",
        },
    )
    key, read_key = (
        project_key(collector, data_dir, scopes=("ingest",)),
        project_key(collector, data_dir, scopes=("read",)),
    )
    urls = {
        "dashboard": f"http://127.0.0.1:{ports['dashboard']}",
        "engine": start_engine(group, port=ports["engine"], speed=options.engine_speed, collector=collector, key=key),
        "collector": collector,
    }
    if find_spec("agentwatch_platform.dashboard.cli") is not None:
        group.start(
            "dashboard",
            agentwatch_command("dashboard", "--port", str(ports["dashboard"]), "--collector", collector, "--open"),
            {"AGENTWATCH_API_KEY": read_key},
        )  # not in argv: ps shows it
    group.wait_ready("engine", engine + "/v1/models")
    if not _dashboard_ready(group, urls["dashboard"], options.log):
        urls.pop("dashboard")
    return urls, (key, read_key)


def _dashboard_ready(group: ProcessGroup, url: str, log: Callable[[str], None]) -> bool:
    """The demo goes on without a dashboard (not installed, or failing), saying so."""
    if find_spec("agentwatch_platform.dashboard.cli") is None:
        return False
    try:
        group.wait_ready("dashboard", url + "/_stcore/health", timeout_s=90)
    except StackError as exc:
        log(f"warning: the dashboard did not start; the demo goes on without it: {exc}")
        return False
    return True


# --- the traffic ------------------------------------------------------------------------------


def _agent(
    base_url: str,
    config: AgentConfig,
    cache: ToolCache,
    corpus: Corpus,
    seed: int,
    *,
    rate_limiter: RateLimiter | None = None,
) -> ResearchAgent:
    client = make_client(base_url + "/v1", "demo")
    tools = ResearchTools(corpus, ToolConfig(latency_s=0.05, failure_rate=0.05, timeout_rate=0.02, seed=seed))
    return ResearchAgent(client, tools, config=config, cache=cache, seed=seed, rate_limiter=rate_limiter)


def export_line(urls: dict[str, str], key: str) -> str:
    """The shell line that points the SDK (``agentwatch.init()``) at the demo's collector with its
    project's key, and the OpenAI client (``OpenAI()``) at the simulated engine."""
    return (
        f"export AGENTWATCH_ENDPOINT={urls['collector']} AGENTWATCH_API_KEY={key} "
        f"OPENAI_BASE_URL={urls['engine']}/v1 OPENAI_API_KEY=sim"
    )


async def _drive(options: DemoOptions, group: ProcessGroup, urls: dict[str, str], keys: tuple[str, str]) -> DemoReport:
    """``keys``: the ingest key (agents, engine) and the read key (dashboard, the demo's report)."""
    key, read_key = keys
    log = options.log
    log("agentwatch demo (the LLM engine is a simulation)")
    for name, url in urls.items():
        log(f"  {name:<10} {url}")
    log(
        f"  data       {options.data_dir}  (ingest and read keys in {options.data_dir / (DEMO_PROJECT + '-ingest-key')}, {DEMO_PROJECT}-read-key)"
    )
    log("  your agent: in another terminal, run the README's 'Instrumenting an agent' snippet after")
    log(f"    {export_line(urls, key)}")
    log(f"  {demo_live.describe(options.duration_s)}")
    log("  content capture is on: the demo's own synthetic prompts and completions are stored (your agent's are")
    log("    not unless it sets AGENTWATCH_CAPTURE_CONTENT=true; the README's 'Content capture' says what that keeps)")
    if options.duration_s < 40:
        log("note: under 40 s of traffic the cost-spike rules may lack the baseline they learn first")
    if options.open_browser and "dashboard" in urls:
        webbrowser.open(urls["dashboard"])
    agentwatch.init(
        endpoint=urls["collector"],
        api_key=key,
        project=DEMO_PROJECT,
        service_name=SERVICE_NAME,
        capture_content=True,  # the demo's prompts are its own synthetic questions: every content view shows
    )
    started = time.time()
    printed: dict[str, str] = {}
    crashes = demo_live.Crashes()
    watcher = asyncio.create_task(
        _watch(urls["collector"], read_key, started, log, printed=printed, dashboard=urls.get("dashboard", ""))
    )
    lanes = asyncio.create_task(
        demo_live.long_and_crashing_runs(
            group, urls["engine"], urls["collector"], key, _long_tasks(), options.duration_s, log, crashes
        )
    )
    try:
        phases = await _guarded(group, urls, _phases(options, urls["engine"]))
    finally:
        agentwatch.force_flush()
        watcher.cancel()
        lanes.cancel()  # a long run under way goes on while the demo serves
    log("traffic done; waiting for the collector to store the spans and evaluate the alerts")
    completed = sum(summary.runs for summary in phases.values())
    report = await _guarded(
        group,
        urls,
        _final_report(
            urls["collector"],
            read_key,
            started,
            completed,
            printed,
            log,
            dashboard=urls.get("dashboard", ""),
            first_incident_s=min(FIRST_INCIDENT_S, options.duration_s),
            crashes=crashes,
            idle_timeout_s=demo_live.idle_timeout_s(options.duration_s),
        ),
    )
    report.phases = phases
    report.savings = await _savings(urls["collector"], read_key, started)
    _print_report(report, log)
    return report


async def _guarded(group: ProcessGroup, urls: dict[str, str], work: Coroutine[Any, Any, T]) -> T:
    """Await ``work`` while checking every second that every child still runs; a dead child
    cancels the work and is reported by name (not as "0 runs recorded" later)."""
    task = asyncio.ensure_future(work)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=1.0)
            if done:
                return task.result()
            group.check_alive(urls)
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


def _serve(group: ProcessGroup, urls: dict[str, str], log: Callable[[str], None]) -> bool:
    """After the traffic: keep every child serving until Ctrl-C (True) or a child dies (StackError)."""
    if "dashboard" in urls:
        log(f"the dashboard keeps serving at {urls['dashboard']}: on the Overview, 'Open it' opens the most")
        log("  expensive run (click a span for its error, tokens and timings); Runs searches and filters")
        log("  (Tool failed, user, session); Cost and Alerts show the spike; Runs pins the long run while it")
        log("  runs (open it: its waterfall grows), and the Overview's Incomplete card lists the killed agents' runs")
    try:  # the line that says Ctrl-C stops it, inside: a Ctrl-C (or SIGTERM) right after it is a normal end too
        log("your agent's runs are welcome too (the export line above); Ctrl-C stops everything")
        while True:
            group.check_alive(urls)
            time.sleep(1.0)
    except KeyboardInterrupt:
        return True


async def _phases(options: DemoOptions, engine_url: str) -> dict[str, LoadSummary]:
    """Baseline (routed, bounded context), then the spike (ReAct, everything on the large model),
    then a short return to the baseline: the spike's incidents resolve on real traffic (a rule on
    runs that finish has no data once nothing runs, and no data never resolves an incident).

    The spike starts on time while the last baseline runs finish, so the demo lasts about
    ``duration_s`` plus the recovery plus one run.
    """
    corpus, cache = Corpus.load(), ToolCache()
    baseline_s = options.duration_s * BASELINE_SHARE
    spike_s = options.duration_s - baseline_s
    queue = RateLimiter(
        project_rate=0.3, project_burst=3, mode="queue", max_wait_s=5.0
    )  # 0.3 runs/s in all, the rest waits
    baseline = _agent(
        engine_url,
        AgentConfig(mode="iterative", max_steps=10, version=BASELINE_VERSION),
        cache,
        corpus,
        seed=1,
        rate_limiter=queue,
    )
    frugal = _agent(
        engine_url,
        AgentConfig(
            mode="iterative",
            max_steps=10,
            version=BASELINE_VERSION,
            max_cost_usd=0.002,
            degradation=DegradationPolicy(action="small_model", budget_share=0.05),
        ),
        cache,
        corpus,
        seed=4,
        rate_limiter=RateLimiter(user_rate=1 / 60, mode="reject"),
    )  # one run a minute: refusals even when runs are slow
    spike = _agent(
        engine_url,
        AgentConfig(mode="react", small_model=None, max_steps=14, version=SPIKE_VERSION),
        cache,
        corpus,
        seed=2,
    )
    options.log(
        f"phase 1/2: baseline, {options.users} users, evolving-report runs routed to sim-small, and one "
        f"frugal user whose runs degrade and are rate limited ({baseline_s:.0f} s)"
    )
    first = asyncio.create_task(
        generate_load(
            baseline, LoadConfig(users=options.users, runs=1_000_000, think_time_s=0.5, duration_s=baseline_s, seed=1)
        )
    )
    levers = asyncio.create_task(
        generate_load(frugal, LoadConfig(users=1, runs=1_000_000, think_time_s=1.0, duration_s=baseline_s, seed=4))
    )
    await asyncio.sleep(baseline_s)
    options.log(
        f"phase 2/2: cost spike, {2 * options.users} users switch to long ReAct runs on sim-large ({spike_s:.0f} s)"
    )
    second = await generate_load(
        spike, LoadConfig(users=2 * options.users, runs=1_000_000, duration_s=spike_s, questions=_long_tasks())
    )
    recovery_s = min(RECOVERY_S, options.duration_s / 2)
    options.log(f"after the spike: back to the baseline's {options.users} users ({recovery_s:.0f} s)")
    third = await generate_load(
        baseline, LoadConfig(users=options.users, runs=1_000_000, think_time_s=0.5, duration_s=recovery_s, seed=3)
    )
    return {"baseline": await first, "frugal": await levers, "spike": second, "recovery": third}


def _long_tasks() -> tuple[str, ...]:
    """Questions the simulated model reads the most documents for (5): the longest ReAct runs."""
    return tuple(q for q in make_questions(200, seed=2) if docs_wanted(q) == 5)


async def _watch(
    collector: str,
    key: str,
    started: float,
    log: Callable[[str], None],
    *,
    printed: dict[str, str] | None = None,
    dashboard: str = "",
) -> None:
    """Every 10 s: runs and cost stored so far; every 2 s: each incident once when it fires and
    once when it resolves (``printed``: incident id -> the last state printed)."""
    printed = {} if printed is None else printed
    with CollectorClient(collector, key, timeout_s=5.0) as client:
        for tick in itertools.count(1):
            await asyncio.sleep(ALERT_INTERVAL_S)  # the pace of the report, not a wait for something
            with contextlib.suppress(CollectorError):
                if tick % 5 == 0:
                    runs = (await asyncio.to_thread(client.runs, start=started, limit=1)).total
                    cost = (await asyncio.to_thread(client.cost, start=started)).total_usd
                    live = await asyncio.to_thread(client.overview, start=started)
                    log(
                        f"  [{time.time() - started:4.0f} s] {runs} runs stored, ${cost:.4f} so far; "
                        f"{live.running_runs} running, {live.incomplete_runs} incomplete"
                    )
                alerts = await asyncio.to_thread(client.alerts, start=started)
                _print_incidents(alerts, printed, started, log, dashboard=dashboard)


def _print_incidents(
    alerts: list[AlertOut], printed: dict[str, str], started: float, log: Callable[[str], None], *, dashboard: str = ""
) -> None:
    """One line when an incident fires, one when it resolves; nothing for an incident already told.
    A fired incident's line is followed by the dashboard's link to its most expensive run."""
    for alert in sorted(alerts, key=lambda a: a.started_at):
        last = printed.get(alert.alert_id)
        if last == alert.state:
            continue
        if last is None:
            log(f"  [{alert.started_at - started:4.0f} s] INCIDENT fired: {alert.message}")
            if dashboard:
                log(f"         its most expensive run: {costliest_run_link(dashboard, alert)}")
        if alert.state == "resolved" and alert.resolved_at is not None:
            log(f"  [{alert.resolved_at - started:4.0f} s] INCIDENT resolved: {alert.message}")
        printed[alert.alert_id] = alert.state


def costliest_run_link(dashboard: str, alert: AlertOut) -> str:
    """The dashboard's run page on the most expensive run around the incident (as the alert
    notifications' ``runs_link``, ``alerts.evaluator``; the demo's buckets are seconds long)."""
    end = alert.resolved_at if alert.resolved_at is not None else time.time()
    params = {
        "costliest": 1,
        "project": DEMO_PROJECT,
        "start": int(alert.started_at - 30),
        "end": int(end + 30),
        **{k: v for k, v in sorted(alert.scope.items()) if k != "project"},
    }
    return f"{dashboard}/run?{urllib.parse.urlencode(params)}"


async def _final_report(
    collector: str,
    key: str,
    started: float,
    completed: int,
    printed: dict[str, str] | None = None,
    log: Callable[[str], None] | None = None,
    *,
    dashboard: str = "",
    first_incident_s: float = FIRST_INCIDENT_S,
    crashes: demo_live.Crashes | None = None,
    idle_timeout_s: float = 0.0,
) -> DemoReport:
    """Wait (bounded) until the runs are stored and an incident has fired, then until every
    incident has resolved (traffic stopped: the spend is back to nothing) or has no data (no
    run finishes any more, which never resolves an incident); read both. A release's incident
    (``version_*`` metrics) is not waited for: it resolves on a later release that compares
    clean, never on the traffic stopping (waiting for it made every demo sit out its 60 s).
    ``first_incident_s``: how long to wait for a first incident (a demo of a few seconds has no
    baseline to spike against, and waits no longer than it ran). The runs of ``crashes`` are
    waited for too, until the collector's ``idle_timeout_s`` (and a margin) after the last crash:
    each turns incomplete then."""
    runs, incomplete = 0, 0
    alerts: list[AlertOut] = []
    crashes = crashes or demo_live.Crashes()
    crashed = crashes.count
    deadline = time.monotonic() + first_incident_s
    settle = time.monotonic() + max(30 * ALERT_INTERVAL_S, 60.0)
    turned = time.monotonic() + (crashes.last_at + idle_timeout_s + 60.0 - time.time() if crashed else 0.0)
    with CollectorClient(collector, key, timeout_s=10.0) as client:
        while time.monotonic() < max(deadline, settle if alerts else deadline, turned if incomplete < crashed else 0.0):
            with contextlib.suppress(CollectorError):
                runs = (await asyncio.to_thread(client.runs, start=started, limit=1)).total
                alerts = await asyncio.to_thread(client.alerts, start=started)
                if crashed:
                    incomplete = (await asyncio.to_thread(client.overview, start=started)).incomplete_runs
                if log is not None:
                    _print_incidents(alerts, {} if printed is None else printed, started, log, dashboard=dashboard)
                if runs >= completed and alerts and all(_settled(a) for a in alerts) and incomplete >= crashed:
                    break
            await asyncio.sleep(1.0)
        with contextlib.suppress(CollectorError):
            live = await asyncio.to_thread(client.overview, start=started)
            return DemoReport(
                runs_recorded=runs, alerts=alerts, running=live.running_runs, incomplete=live.incomplete_runs
            )
    return DemoReport(runs_recorded=runs, alerts=alerts)


def _settled(alert: AlertOut) -> bool:
    """Whether the demo's report need not wait longer for ``alert`` (``_final_report``)."""
    return alert.state == "resolved" or alert.no_data_since is not None or alert.metric.startswith("version_")


async def _savings(collector: str, key: str, started: float) -> list[LeverSaving]:
    """What each cost lever saved during the demo, as the collector measured it (empty if it cannot say)."""
    with CollectorClient(collector, key, timeout_s=30.0) as client, contextlib.suppress(CollectorError):
        cost = await asyncio.to_thread(client.cost, start=started)
        return cost.savings.levers if cost.savings is not None else []
    return []


def _print_report(report: DemoReport, log: Callable[[str], None]) -> None:
    for name, summary in report.phases.items():
        log(
            f"{name}: {summary.runs} runs, ${summary.cost_usd:.4f}, p50 {summary.latency_p50_s:.1f} s, "
            f"{summary.tool_failures} tool failures, {summary.cache_hits} cache hits, {summary.degraded} degraded, "
            f"{summary.rate_queued} queued, {summary.rate_refused} refused"
        )
    log(
        f"runs recorded by the collector: {report.runs_recorded} ({report.running} running, {report.incomplete} incomplete)"
    )
    for lever in report.savings:
        log(
            f"saved by {lever.lever}: ${lever.saving_usd:.6f} over {lever.events:,} event{'' if lever.events == 1 else 's'} ({lever.basis})"
        )
    if not report.alerts:
        log("alerts fired: none")
    for alert in sorted(report.alerts, key=lambda a: a.started_at):  # one line per incident
        if alert.resolved_at:
            end = f"resolved after {alert.resolved_at - alert.started_at:.0f} s"
        else:
            end = "still firing" + (" (no data: no run finished since)" if alert.no_data_since else "")
        log(
            f"alert fired: {alert.rule} [{alert.severity}] {alert.scope}: {metric_label(alert.metric)} peak "
            f"{figure(alert.metric, alert.peak)}"
            + (f" against a baseline of {figure(alert.metric, alert.baseline)}" if alert.baseline is not None else "")
            + f", {end}"
        )
