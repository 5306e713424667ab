"""The ``agentwatch`` command line: one entry point, each package registers its commands.

Each package owns a ``register(subparsers)`` in its own ``cli`` module, so the command
line grows without one file that every part edits.
"""

from __future__ import annotations

import argparse
import importlib
import sys

_COMMAND_MODULES = (
    "collector.commands",  # collector, keys, reprice
    "reference_agent.cli",  # engine, agent, loadgen, demo
    "alerts.cli",  # alerts run|test|check
    "dashboard.cli",  # dashboard
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agentwatch", description="Observability and cost monitoring for LLM agents.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module_name in _COMMAND_MODULES:
        importlib.import_module(module_name).register(sub)
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


if __name__ == "__main__":
    sys.exit(main())
