"""Collector-side redaction of captured content, the second line after the SDK's redactor.

Agents built without agentwatch (or with an old SDK) may send prompts that carry secrets;
the collector masks them before they are stored. Patterns come from
``Settings.redact_patterns``: ``default``, ``none``, or extra regexes separated by ``;;``
(added to the defaults).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

# (pattern, needles): a pattern runs only on text containing one of its needles (substring
# scans are far cheaper than a regex pass), so prompts without secrets cost little.
_DEFAULT_RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    (r"\b(?:sk|pk|rk)-(?:[A-Za-z0-9_-]{2,}-)?[A-Za-z0-9_-]{16,}", ("sk-", "pk-", "rk-")),  # OpenAI/Anthropic-style keys
    (r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b", ("AKIA", "ASIA")),  # AWS access key ids
    (r"\bgh[pousr]_[A-Za-z0-9]{30,}\b", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_")),  # GitHub tokens
    (r"\baw_[0-9a-f]{12}_[A-Za-z0-9_-]{20,}", ("aw_",)),  # agentwatch keys
    (r"\b[Bb][Ee][Aa][Rr][Ee][Rr]\s+[A-Za-z0-9._~+/=-]{8,}", ("earer", "EARER")),  # Authorization: Bearer ...
    (r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}\b", ("@",)),  # e-mail addresses
    (r"\b(?:\d[ -]?){12,18}\d\b", tuple("0123456789")),  # card numbers: 13-19 digits, spaces or dashes
)
MASK = "[REDACTED]"


class Redactor:
    """Replaces every match of its patterns with ``[REDACTED]``; a no-op when it has none."""

    def __init__(self, rules: Sequence[tuple[str, tuple[str, ...]]]) -> None:
        self._rules = [(re.compile(pattern), needles) for pattern, needles in rules]

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
        return cls((*_DEFAULT_RULES, *((p, ()) for p in extra)))

    @property
    def active(self) -> bool:
        return bool(self._rules)

    def __call__(self, text: str) -> str:
        for regex, needles in self._rules:
            if not needles or _contains(text, needles):
                text = regex.sub(MASK, text)
        return text


def _contains(text: str, needles: tuple[str, ...]) -> bool:
    for needle in needles:
        if needle in text:
            return True
    return False
