"""Reading ``AGENTWATCH_*`` environment variables: one parser for every part's settings.

The SDK (``agentwatch._config``), the collector (``collector.settings``) and the dashboard
(``dashboard.config``) each keep their own list of variables, defaults and documentation, and
read the environment through this module, so a value means the same everywhere and a bad one
is reported the same way: ``AGENTWATCH_PORT='x': expected an integer``. It lives in the SDK
because the SDK imports nothing of the platform; it needs only the standard library.

A variable's type is its default's: ``bool`` (1/true/yes/on, 0/false/no/off), ``int``, ``float``,
``str`` or any type built from a string (``pathlib.Path``). What to do with a bad value is the
caller's policy: ``env_value`` raises (a server refuses to start), ``env_value_or_default``
logs and keeps the default (the SDK never stops an agent over a typo).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

__all__ = ["ENV_PREFIX", "EnvError", "env_value", "env_value_or_default", "parse_as", "parse_bool"]

ENV_PREFIX = "AGENTWATCH_"
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")

T = TypeVar("T")


class EnvError(ValueError):
    """A variable's value cannot be used; the message names the variable, the value and why."""

    def __init__(self, variable: str, raw: str, problem: str) -> None:
        super().__init__(f"{variable}={raw!r}: {problem}")
        self.variable, self.raw, self.problem = variable, raw, problem


def parse_bool(raw: str) -> bool:
    low = raw.strip().lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    raise ValueError("expected true or false (1/0, yes/no, on/off)")


def parse_as(raw: str, default: T) -> T:
    """``raw`` read as the type of ``default``; ``ValueError`` saying what was expected."""
    kind: Any = type(default)
    if isinstance(default, bool):
        return parse_bool(raw)  # type: ignore[return-value]
    if isinstance(default, int):
        try:
            return kind(raw.strip())  # type: ignore[no-any-return]
        except ValueError:
            raise ValueError("expected an integer") from None
    if isinstance(default, float):
        try:
            return kind(raw.strip())  # type: ignore[no-any-return]
        except ValueError:
            raise ValueError("expected a number") from None
    return raw if isinstance(default, str) else kind(raw)  # type: ignore[return-value]


def env_value(
    variable: str,
    default: T,
    *,
    check: Callable[[T], object] | None = None,
    empty_is_unset: bool = True,
    environ: Mapping[str, str] | None = None,
) -> T:
    """The value of ``variable`` (a full name, ``AGENTWATCH_...``), or ``default`` when it is unset.

    ``check`` raises ``ValueError`` for a value out of range; every failure becomes ``EnvError``.
    With ``empty_is_unset`` (the default) an empty variable counts as unset.
    """
    raw = (os.environ if environ is None else environ).get(variable)
    if raw is None or (raw == "" and empty_is_unset):
        return default
    try:
        value = parse_as(raw, default)
        if check is not None:
            check(value)
    except ValueError as exc:
        raise EnvError(variable, raw, str(exc)) from None
    return value


def env_value_or_default(
    variable: str,
    default: T,
    *,
    log: logging.Logger,
    check: Callable[[T], object] | None = None,
    environ: Mapping[str, str] | None = None,
) -> T:
    """As ``env_value``, but a bad value is logged (a warning naming it) and ``default`` used."""
    try:
        return env_value(variable, default, check=check, environ=environ)
    except EnvError as exc:
        log.warning("agentwatch: ignoring %s; using %r", exc, default)
        return default
