"""Redaction of captured content before it leaves the process.

Content (prompts, completions, tool arguments and results) is captured only when
``capture_content`` is on. Then the user's ``redact`` hook runs first (it knows the domain),
the built-in redactor second (API keys, bearer tokens, e-mail addresses), and the result is
truncated. A hook must take a ``str`` and return a ``str``; when it raises, the value is
withheld (never sent unredacted) and the failure is counted.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from ._stats import COUNTERS, logger

REDACTED = "[REDACTED]"
WITHHELD = "[agentwatch: redaction failed, value withheld]"

_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # Bearer tokens first, so that the token is replaced whole.
    (re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{8,}"), "Bearer " + REDACTED),
    # OpenAI / Anthropic style keys (sk-..., sk-proj-..., sk-ant-...), agentwatch keys (aw_...).
    (re.compile(r"\b(?:sk|rk|pk)-[A-Za-z0-9_-]{16,}"), REDACTED),
    (re.compile(r"\baw_[A-Za-z0-9_-]{16,}"), REDACTED),
    # Well-known token shapes: GitHub, Slack, AWS access key ids, Google API keys.
    (re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr|github_pat)_[A-Za-z0-9_]{20,}"), REDACTED),
    (re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"), REDACTED),
    (re.compile(r"\bAKIA[0-9A-Z]{16}\b"), REDACTED),
    (re.compile(r"\bAIza[0-9A-Za-z_-]{35}"), REDACTED),
    # key=value / "api_key": "..." assignments of secrets.
    (re.compile(r"(?i)((?:api[_-]?key|secret|password|token)[\"']?\s*[:=]\s*[\"']?)[^\s\"',;]{6,}"), r"\1" + REDACTED),
    (re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}"), "[EMAIL]"),
)


def builtin_redact(text: str) -> str:
    """Remove API keys, bearer tokens and e-mail addresses."""
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def to_text(value: object) -> str:
    """Content as text: strings as they are, everything else as JSON (repr as a last resort)."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, default=_jsonable, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


def _jsonable(value: object) -> object:
    dump = getattr(value, "model_dump", None)  # pydantic models (OpenAI client objects)
    if callable(dump):
        return dump(exclude_none=True)
    return repr(value)


class Redactor:
    """Hook, then built-in patterns, then truncation to ``max_chars``."""

    def __init__(self, hook: Callable[[str], str] | None, max_chars: int) -> None:
        self._hook = hook
        self._max_chars = max_chars

    def __call__(self, value: object) -> str:
        text = to_text(value)
        if self._hook is not None:
            try:
                text = self._hook(text)
                if not isinstance(text, str):
                    raise TypeError(f"redact hook returned {type(text).__name__}, expected str")
            except Exception as exc:
                COUNTERS.add("redaction_errors")
                logger.warning("agentwatch: redact hook failed (%r); value withheld", exc)
                return WITHHELD
        return truncate(builtin_redact(text), self._max_chars)


def truncate(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    return text[:max_chars] + f"...[truncated {len(text) - max_chars} chars]"
