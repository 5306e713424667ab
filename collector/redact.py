"""Collector-side redaction of captured content, the second line after the SDK's redactor.

Agents built without agentwatch (or with an old SDK) may send prompts that carry secrets;
the collector masks them before they are stored. Patterns come from
``Settings.redact_patterns``: ``default``, ``none``, or extra regexes separated by ``;;``
(added to the defaults).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence


def _contains(*needles: str) -> Callable[[str], bool]:
    return lambda text: any(n in text for n in needles)


# (pattern, cheap pre-check): a pattern runs only on text that could match it, so the common
# case (prompts without secrets) costs a few substring scans instead of a regex pass each.
_DEFAULT_RULES: tuple[tuple[str, Callable[[str], bool]], ...] = (
    (r"\b(?:sk|pk|rk)-(?:[A-Za-z0-9_-]{2,}-)?[A-Za-z0-9_-]{16,}", _contains("sk-", "pk-", "rk-")),  # OpenAI/Anthropic-style keys
    (r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b", _contains("AKIA", "ASIA")),  # AWS access key ids
    (r"\bgh[pousr]_[A-Za-z0-9]{30,}\b", _contains("ghp_", "gho_", "ghu_", "ghs_", "ghr_")),  # GitHub tokens
    (r"\baw_[0-9a-f]{12}_[A-Za-z0-9_-]{20,}", _contains("aw_")),  # agentwatch keys
    (r"\b[Bb][Ee][Aa][Rr][Ee][Rr]\s+[A-Za-z0-9._~+/=-]{8,}", _contains("earer", "EARER")),  # Authorization: Bearer ...
    (r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}\b", _contains("@")),  # e-mail addresses
    (r"\b(?:\d[ -]?){12,18}\d\b", re.compile(r"\d\d\d").search),  # card numbers: 13-19 digits, spaces or dashes
)
MASK = "[REDACTED]"


class Redactor:
    """Replaces every match of its patterns with ``[REDACTED]``; a no-op when it has none."""

    def __init__(self, rules: Sequence[tuple[str, Callable[[str], object] | None]]) -> None:
        self._rules = [(re.compile(pattern), check) for pattern, check in rules]

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
        for regex, check in self._rules:
            if check is None or check(text):
                text = regex.sub(MASK, text)
        return text
