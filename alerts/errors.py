"""The alerts package's one exception tree: callers catch ``AlertsError`` and nothing else."""

from __future__ import annotations


class AlertsError(Exception):
    """Base of every error raised by the alerts package."""


class RulesError(AlertsError):
    """A rules file is invalid; the message names the file, the line and the key.

    ``key`` is the dotted path of the offending key (``rules[2].condition.z``) and ``line``
    its 1-based line in the file (0 when unknown), so an editor can jump to it.
    """

    def __init__(self, message: str, *, source: str = "", line: int = 0, key: str = "") -> None:
        self.source = source
        self.line = line
        self.key = key
        where = f"{source}:{line}: " if source and line else (f"{source}: " if source else "")
        keypart = f"{key}: " if key else ""
        super().__init__(f"{where}{keypart}{message}")
        self.problem = message


class SourceError(AlertsError):
    """A metric could not be read (collector unreachable, query rejected); the rule is skipped."""


class DeliveryError(AlertsError):
    """A notification could not be delivered on one attempt; the dispatcher retries it."""


class RoleLost(AlertsError):
    """The alerts role may have passed to another collector in the middle of an evaluation round:
    the round ends without recording or sending its changes (never leaves ``Evaluator.run_once``)."""
