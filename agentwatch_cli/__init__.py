"""The ``agentwatch`` command line: the one place that assembles every part's commands.

Each part owns a ``register(subparsers)`` in its own ``cli`` module and knows no other part's;
this composition root is the only module that names them all, and no part imports it. It also
hands the collector the parts that run inside it (``collector.plugins``: the alerts). Run it
as the ``agentwatch`` console script or ``python -m agentwatch_cli``.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable

from alerts import cli as alerts_cli
from alerts import plugin as alerts_plugin
from collector import commands as collector_commands
from dashboard import cli as dashboard_cli
from reference_agent import cli as reference_agent_cli

Register = Callable[[argparse._SubParsersAction], None]  # type: ignore[type-arg]

REGISTRARS: tuple[Register, ...] = (
    # collector (with the alerts inside: routes and evaluator), keys, reprice, whatif
    functools.partial(collector_commands.register, plugins=(alerts_plugin.PLUGIN,)),
    reference_agent_cli.register,  # engine, agent, loadgen, demo
    alerts_cli.register,  # alerts run|test|check
    dashboard_cli.register,  # dashboard
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agentwatch", description="Observability and cost monitoring for LLM agents.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for register in REGISTRARS:
        register(sub)
    _remember_parsers(parser)
    return parser


def _remember_parsers(parser: argparse.ArgumentParser) -> None:
    """Every (sub)parser puts itself in ``args.parser_``; the innermost one parsed wins."""
    parser.set_defaults(parser_=parser)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in set(action.choices.values()):
                _remember_parsers(child)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # said by the (sub)command that was meant, with its usage, not the top level's
        args.parser_.error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        result = args.func(args)
    except KeyboardInterrupt:
        return 130
    return int(result or 0)
