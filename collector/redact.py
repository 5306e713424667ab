"""Collector-side redaction of captured content, the second line after the SDK's redactor.

Agents built without agentwatch (or with an old SDK) may send prompts that carry secrets;
the collector masks them before they are stored. Patterns come from
``Settings.redact_patterns``: ``default``, ``none``, or extra regexes separated by ``;;``
(added to the defaults).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Rule:
    """A pattern and a cheap test that must hold for it to match: substring scans are far
    cheaper than a regex pass over every position, so text without secrets costs little.
    The same rules run in Python (``Redactor``) and in ClickHouse (``collector.storage.otlp_sql``)."""

    pattern: str
    needles: tuple[str, ...] = ()  # the text holds one of these (none: no prefilter) ...
    gate: str = ""  # ... looked for only when it holds this one character (a memchr scan)
    min_digits: int = 0  # the text holds at least this many digits

    def applies(self, text: str) -> bool:
        if self.gate and self.gate not in text:
            return False
        if self.needles and not any(needle in text for needle in self.needles):
            return False
        if self.min_digits:
            data = text.encode()
            return len(data) - len(data.translate(None, b"0123456789")) >= self.min_digits
        return True


DEFAULT_RULES: tuple[Rule, ...] = (
    Rule(r"\b(?:sk|pk|rk)-(?:[A-Za-z0-9_-]{2,}-)?[A-Za-z0-9_-]{16,}", ("sk-", "pk-", "rk-"), gate="-"),  # OpenAI/Anthropic-style keys
    Rule(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b", ("AKIA", "ASIA"), gate="A"),  # AWS access key ids
    Rule(r"\bgh[pousr]_[A-Za-z0-9]{30,}\b", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), gate="_"),  # GitHub tokens
    Rule(r"\baw_[0-9a-f]{12}_[A-Za-z0-9_-]{20,}", ("aw_",), gate="_"),  # agentwatch keys
    Rule(r"\b[Bb][Ee][Aa][Rr][Ee][Rr]\s+[A-Za-z0-9._~+/=-]{8,}", ("earer", "EARER")),  # Authorization: Bearer ...
    Rule(r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}\b", ("@",)),  # e-mail addresses
    Rule(r"\b(?:\d[ -]?){12,18}\d\b", min_digits=13),  # card numbers: 13-19 digits, spaces or dashes
)
MASK = "[REDACTED]"


class Redactor:
    """Replaces every match of its patterns with ``[REDACTED]``; a no-op when it has none."""

    def __init__(self, rules: Sequence[Rule]) -> None:
        self.rules = tuple(rules)
        self._compiled = [(re.compile(rule.pattern), rule) for rule in self.rules]

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
        return cls((*DEFAULT_RULES, *(Rule(p) for p in extra)))

    @property
    def active(self) -> bool:
        return bool(self.rules)

    def __call__(self, text: str) -> str:
        for regex, rule in self._compiled:
            if rule.applies(text):
                text = regex.sub(MASK, text)
        return text

