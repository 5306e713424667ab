"""Collector-side redaction of captured content, the second line after the SDK's redactor.

Agents built without agentwatch (or with an old SDK) may send prompts that carry secrets;
the collector masks them before they are stored. Patterns come from
``Settings.redact_patterns``: ``default``, ``none``, or extra regexes separated by ``;;``
(added to the defaults).
"""

from __future__ import annotations

import re

_DEFAULT_PATTERNS = (
    r"\b(?:sk|pk|rk)-(?:[A-Za-z0-9_-]{2,}-)?[A-Za-z0-9_-]{16,}",  # OpenAI/Anthropic-style API keys
    r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b",  # AWS access key ids
    r"\bgh[pousr]_[A-Za-z0-9]{30,}\b",  # GitHub tokens
    r"\baw_[0-9a-f]{12}_[A-Za-z0-9_-]{20,}",  # agentwatch keys
    r"\b[Bb][Ee][Aa][Rr][Ee][Rr]\s+[A-Za-z0-9._~+/=-]{8,}",  # Authorization: Bearer ...
    r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}\b",  # e-mail addresses
    r"\b(?:\d[ -]?){12,18}\d\b",  # card numbers (13-19 digits, spaces or dashes allowed)
)
MASK = "[REDACTED]"


class Redactor:
    """Replaces every match of its patterns with ``[REDACTED]``; a no-op when it has none."""

    def __init__(self, patterns: tuple[str, ...] | list[str]) -> None:
        self._regex = re.compile("|".join(f"(?:{p})" for p in patterns)) if patterns else None

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
        return cls((*_DEFAULT_PATTERNS, *extra))

    @property
    def active(self) -> bool:
        return self._regex is not None

    def __call__(self, text: str) -> str:
        if self._regex is None or not text:
            return text
        return self._regex.sub(MASK, text)
