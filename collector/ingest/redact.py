"""Collector-side redaction of captured content, the second line after the SDK's redactor.

Agents built without agentwatch (or with an old SDK) may send prompts that carry secrets;
the collector masks them before they are stored. Patterns come from
``Settings.redact_patterns``: ``default``, ``none``, or extra regexes separated by ``;;``
(added to the defaults).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence


def _needles(*needles: str, gate: str = "") -> Callable[[str], bool]:
    """Whether text holds one of ``needles``; they are looked for only when it holds ``gate``, a
    character every match contains (a one-character scan is memchr, far cheaper than a longer one)."""

    def check(text: str) -> bool:
        if gate and gate not in text:
            return False
        for needle in needles:
            if needle in text:
                return True
        return False

    return check


def _digits(count: int) -> Callable[[str], bool]:
    """Whether text holds at least ``count`` digits (a card number cannot hide in fewer)."""

    def check(text: str) -> bool:
        for digit in "0123456789":
            if digit in text:
                data = text.encode()
                return len(data) - len(data.translate(None, b"0123456789")) >= count
        return False

    return check


# (pattern, prefilter): a pattern runs only on text its prefilter accepts (substring scans are
# far cheaper than a regex pass over every position), so prompts without secrets cost little.
_DEFAULT_RULES: tuple[tuple[str, Callable[[str], bool] | None], ...] = (
    (
        r"\b(?:sk|pk|rk)-(?:[A-Za-z0-9_-]{2,}-)?[A-Za-z0-9_-]{16,}",
        _needles("sk-", "pk-", "rk-", gate="-"),
    ),  # OpenAI/Anthropic-style keys
    (r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b", _needles("AKIA", "ASIA", gate="A")),  # AWS access key ids
    (r"\bgh[pousr]_[A-Za-z0-9]{30,}\b", _needles("ghp_", "gho_", "ghu_", "ghs_", "ghr_", gate="_")),  # GitHub tokens
    (r"\baw_[0-9a-f]{12}_[A-Za-z0-9_-]{20,}", _needles("aw_", gate="_")),  # agentwatch keys
    (r"\b[Bb][Ee][Aa][Rr][Ee][Rr]\s+[A-Za-z0-9._~+/=-]{8,}", _needles("earer", "EARER")),  # Authorization: Bearer ...
    (r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}\b", _needles("@")),  # e-mail addresses
    (r"\b(?:\d[ -]?){12,18}\d\b", _digits(13)),  # card numbers: 13-19 digits, spaces or dashes
)
MASK = "[REDACTED]"


class Redactor:
    """Replaces every match of its patterns with ``[REDACTED]``; a no-op when it has none."""

    def __init__(self, rules: Sequence[tuple[str, Callable[[str], bool] | None]]) -> None:
        self._rules = [(re.compile(pattern), prefilter) for pattern, prefilter in rules]

    @classmethod
    def from_setting(cls, value: str) -> Redactor:
        """Parse ``Settings.redact_patterns``; a bad regex raises ``ValueError`` naming it."""
        value = value.strip()
        if value.lower() == "none":
            return cls(())
        extra = [p for p in value.split(";;") if p.strip() and p.strip().lower() != "default"]
        for pattern in extra:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"AGENTWATCH_REDACT_PATTERNS: invalid regex {pattern!r}: {exc}") from None
        return cls((*_DEFAULT_RULES, *((p, None) for p in extra)))

    @property
    def active(self) -> bool:
        return bool(self._rules)

    def __call__(self, text: str) -> str:
        for regex, prefilter in self._rules:
            if prefilter is None or prefilter(text):
                text = regex.sub(MASK, text)
        return text
