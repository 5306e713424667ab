"""``agentwatch whatif``: a cost policy's estimated effect on a past range, from a running collector.

    agentwatch whatif route --step research --model sim-small --since 1h
    agentwatch whatif cap_steps --cap 4 --since 1d --agent research-agent
    agentwatch whatif evolving_report --bound 100 --since 30m

It reads ``/api/whatif`` through the typed client with a key that has the ``read`` scope
(``--key`` or ``AGENTWATCH_API_KEY``) at ``--collector`` (or ``AGENTWATCH_ENDPOINT``).
"""

from __future__ import annotations

import argparse
import os
import time

from agentwatch_api.client import CollectorClient, CollectorError
from agentwatch_api.schemas import WHATIF_POLICIES, WhatIf
from agentwatch_platform.collector.query.reprice import parse_since

DEFAULT_COLLECTOR = "http://127.0.0.1:4318"


def register_whatif(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("whatif", help="estimate what a cost policy would have changed over a past range")
    p.add_argument("policy", choices=WHATIF_POLICIES, help="route a step kind, cap steps, or the evolving report")
    p.add_argument(
        "--since", default="1h", help="start of the range: 7d, 12h, 30m, RFC 3339 or epoch seconds (default 1h)"
    )
    p.add_argument("--until", default=None, help="end of the range (default now)")
    p.add_argument("--agent", default=None, help="only this agent's runs")
    p.add_argument("--step", default=None, help="route: the step name whose LLM calls move (e.g. research)")
    p.add_argument("--model", default=None, help="route: the model they move to (e.g. sim-small)")
    p.add_argument("--cap", type=int, default=None, help="cap_steps: steps of work per run")
    p.add_argument("--bound", type=int, default=None, help="evolving_report: report tokens per call (default 100)")
    p.add_argument(
        "--collector",
        default=os.environ.get("AGENTWATCH_ENDPOINT", DEFAULT_COLLECTOR),
        help=f"collector URL (default $AGENTWATCH_ENDPOINT or {DEFAULT_COLLECTOR})",
    )
    p.add_argument(
        "--key", default=os.environ.get("AGENTWATCH_API_KEY", ""), help="a read key (default $AGENTWATCH_API_KEY)"
    )
    p.set_defaults(func=whatif_command)


def whatif_command(args: argparse.Namespace) -> int:
    try:
        start = parse_since(args.since)
        end = parse_since(args.until) if args.until else time.time()
    except ValueError as exc:
        raise SystemExit(f"agentwatch whatif: {exc}") from None
    try:
        with CollectorClient(args.collector, args.key, timeout_s=120) as client:
            answer = client.whatif(
                args.policy,
                start=start,
                end=end,
                agent=args.agent,
                step=args.step,
                model=args.model,
                cap=args.cap,
                bound=args.bound,
            )
    except CollectorError as exc:
        raise SystemExit(f"agentwatch whatif: {exc}") from None
    print(format_whatif(answer))
    return 0


def format_whatif(w: WhatIf) -> str:
    ratio = f" ({w.change_ratio:+.1%})" if w.change_ratio is not None else ""
    return "\n".join(
        [
            f"what if: {w.description}",
            f"runs          {w.runs} in range, {w.runs_changed} changed ({w.calls_changed} LLM calls)",
            f"cost          ${w.actual_usd:.6f} -> ${w.estimate_usd:.6f}",
            f"change        ${w.change_usd:+.6f}{ratio} +/- ${w.uncertainty_usd:.6f} (95 %)",
            f"tokens        {w.actual_tokens:,} -> {w.estimate_tokens:,}",
            f"basis         {w.basis}; prices {w.price_version}",
        ]
    )
