"""The ``agentwatch`` command line: the one place that assembles every part's commands.

The SDK ships the command and none of its commands: each part of the platform declares its
``register(subparsers)`` under the ``agentwatch.commands`` entry-point group (the platform's
pyproject.toml), added in the order of the entry points' names (``10-collector``), so this module imports no part and no part imports
it. With the SDK alone, ``agentwatch --help`` says that the platform is not installed; a part
whose registrar fails to import is named in one line and the others still work. The standard
library only: the SDK's light install runs it. Run it as the ``agentwatch`` console script or
``python -m agentwatch``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from importlib.metadata import entry_points

Register = Callable[[argparse._SubParsersAction], None]  # type: ignore[type-arg]

COMMANDS_GROUP = "agentwatch.commands"
NO_PLATFORM = "no platform commands are installed (pip install agentwatch-platform)"


def registrars() -> list[Register]:
    """Every installed part's registrar, by entry-point name; one that fails to load is reported and left out."""
    found: list[Register] = []
    for entry in sorted(entry_points(group=COMMANDS_GROUP), key=lambda e: e.name):
        try:
            found.append(entry.load())
        except Exception as exc:  # a broken part must not take the other parts' commands with it
            print(
                f"agentwatch: the {entry.name!r} commands are unavailable ({entry.value}: {type(exc).__name__}: {exc})",
                file=sys.stderr,
            )
    return found


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agentwatch", description="Observability and cost monitoring for LLM agents.")
    found = registrars()
    if not found:
        parser.epilog = NO_PLATFORM
        return parser
    # Not ``required``: argparse would answer ``agentwatch --bogus`` with "the following arguments
    # are required: COMMAND"; ``main`` names the unknown option first, then a missing command.
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for register in found:
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
    if not hasattr(args, "parser_"):  # no part installed, so no command (``--help`` has exited already)
        parser.exit(2, f"agentwatch: {NO_PLATFORM}\n")
    if unknown:  # said by the (sub)command that was meant, with its usage, not the top level's
        what = "unknown option" if args.command is None else "unrecognized arguments:"
        args.parser_.error(
            f"{what} {' '.join(unknown)}" + (" (agentwatch --help lists the commands)" if args.command is None else "")
        )
    if args.command is None:
        parser.error("a COMMAND is required (agentwatch --help lists them)")
    try:
        result = args.func(args)
    except KeyboardInterrupt:
        return 130
    return int(result or 0)
