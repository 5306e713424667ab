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
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        result = args.func(args)
    except KeyboardInterrupt:
        return 130
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
