"""``agentwatch dashboard``: start the Streamlit dashboard as a headless server.

The command replaces itself with ``python -m dashboard.server run dashboard/app.py`` (Streamlit's
command line after the pages' heavy imports; exec, so signals reach Streamlit directly and no
orphan is left), configured through the ``AGENTWATCH_*`` variables of ``dashboard.config``; the
flags below set them.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from pathlib import Path

from agentwatch_platform.dashboard.config import DEFAULT_COLLECTOR_URL

APP = Path(__file__).with_name("app.py")

if importlib.util.find_spec("streamlit") is None:  # `agentwatch --help` names the missing extra in one line
    raise ModuleNotFoundError("Streamlit is not installed: pip install 'agentwatch-platform[dashboard]'")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("dashboard", help="run the web dashboard (Streamlit) over the collector's query API")
    p.add_argument(
        "--collector", default=None, help=f"collector URL (AGENTWATCH_COLLECTOR_URL, default {DEFAULT_COLLECTOR_URL})"
    )
    p.add_argument("--api-key", default=None, help="project API key to query with (AGENTWATCH_API_KEY)")
    p.add_argument("--port", type=int, default=8501, help="port to serve on (default 8501)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument(
        "--open",
        action="store_true",
        help="open local mode: no login, a banner on every page (AGENTWATCH_DASHBOARD_OPEN=1)",
    )
    p.set_defaults(func=run)


def streamlit_command(args: argparse.Namespace) -> list[str]:
    return [
        sys.executable,
        "-m",
        "agentwatch_platform.dashboard.server",
        "run",
        str(APP),
        "--server.headless",
        "true",
        "--server.port",
        str(args.port),
        "--server.address",
        args.host,
        "--browser.gatherUsageStats",
        "false",
        "--server.fileWatcherType",
        "none",
        "--server.runOnSave",
        "false",
        "--client.toolbarMode",
        "viewer",
        "--client.showErrorDetails",
        "type",
        "--global.developmentMode",
        "false",
    ]


def streamlit_env(args: argparse.Namespace) -> dict[str, str]:
    env = dict(os.environ)
    if args.collector:
        env["AGENTWATCH_COLLECTOR_URL"] = args.collector
    if args.api_key:
        env["AGENTWATCH_API_KEY"] = args.api_key
    if args.open:
        env["AGENTWATCH_DASHBOARD_OPEN"] = "1"
    return env


def run(args: argparse.Namespace) -> int:
    env = streamlit_env(args)
    if env.get("AGENTWATCH_DASHBOARD_OPEN") == "1" and args.host not in ("127.0.0.1", "localhost", "::1"):
        print(
            f"warning: open mode (no login) on {args.host}: anyone who reaches it sees the project's data",
            file=sys.stderr,
        )
    print(
        f"agentwatch dashboard on http://{args.host}:{args.port} (collector {env.get('AGENTWATCH_COLLECTOR_URL', DEFAULT_COLLECTOR_URL)})",
        file=sys.stderr,
    )
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, streamlit_command(args), env)
    return 0  # not reached: execve replaces the process
