"""Feedback and scores for a finished run, sent from anywhere (a web handler, an eval job).

``feedback()`` POSTs ``{score, label, comment, source}`` as JSON to
``<endpoint>/api/runs/{trace_id}/feedback`` with the project API key. It uses the stdlib
(``urllib``) with a short timeout, returns whether the collector accepted it, and never
raises for network or server problems (they are logged and counted); bad arguments raise
``ValueError`` at once, since retrying them could never succeed.
"""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request

from ._config import Config, resolve
from ._decorators import Run
from ._stats import COUNTERS, logger
from ._tracing import STATE, force_flush

SOURCES = ("user", "eval")
MAX_COMMENT_CHARS = 10_000
_TRACE_ID = re.compile(r"^[0-9a-f]{32}$")
_RETRY_S = 0.5  # between tries while the run is not stored yet (404)


def feedback(
    run_id: str | Run,
    *,
    score: float | None = None,
    label: str = "",
    comment: str = "",
    source: str = "user",
    timeout_s: float = 5.0,
) -> bool:
    """Attach feedback to a run (its ``trace_id``, or the ``Run`` handle). True when stored."""
    trace_id = _trace_id(run_id)
    body = _body(score, label, comment, source)
    config = STATE.config or resolve()
    return _post(config, trace_id, body, timeout_s)


def _trace_id(run_id: str | Run) -> str:
    trace_id = run_id.trace_id if isinstance(run_id, Run) else run_id
    if not isinstance(trace_id, str) or not _TRACE_ID.match(trace_id.lower()):
        raise ValueError(f"feedback(run_id={run_id!r}): expected a run's trace_id, 32 hex digits")
    if trace_id.strip("0") == "":
        raise ValueError(
            "feedback(): this run has no trace id (32 hex digits, not all zero): "
            "tracing was off when it ran (call agentwatch.init() first)"
        )
    return trace_id.lower()


def _body(score: float | None, label: str, comment: str, source: str) -> bytes:
    if score is not None and (isinstance(score, bool) or not isinstance(score, int | float) or score != score):
        raise ValueError(f"feedback(score={score!r}): expected a number or None")
    if not isinstance(label, str) or not isinstance(comment, str):
        raise ValueError("feedback(label=, comment=): expected strings")
    if len(comment) > MAX_COMMENT_CHARS:
        raise ValueError(f"feedback(comment=...): {len(comment)} chars, at most {MAX_COMMENT_CHARS}")
    if source not in SOURCES:
        raise ValueError(f"feedback(source={source!r}): expected one of {', '.join(SOURCES)}")
    if score is None and not label and not comment:
        raise ValueError("feedback(): give at least one of score, label or comment")
    payload = {"score": score, "label": label, "comment": comment, "source": source}
    return json.dumps(payload).encode()


def _post(config: Config, trace_id: str, body: bytes, timeout_s: float) -> bool:
    """POST the feedback; a 404 (the run's spans not stored yet: feedback often follows a run by
    less than the export delay) exports this process's queued spans and asks again, every
    ``_RETRY_S``, until ``timeout_s`` has passed."""
    url = f"{config.endpoint.rstrip('/')}/api/runs/{trace_id}/feedback"
    headers = {"Content-Type": "application/json"}
    if config.api_key:
        headers["Authorization"] = f"Bearer {config.api_key}"
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    deadline = time.monotonic() + timeout_s
    flushed = False
    while True:
        try:
            with urllib.request.urlopen(request, timeout=max(deadline - time.monotonic(), 0.1)) as response:
                response.read()
            COUNTERS.add("feedback_sent")
            return True
        except urllib.error.HTTPError as exc:
            if exc.code == 404 and deadline - time.monotonic() > _RETRY_S:
                if not flushed:
                    flushed = True
                    force_flush(max(min(deadline - time.monotonic() - _RETRY_S, 2.0), 0.1))
                time.sleep(_RETRY_S)
                continue
            logger.warning("agentwatch: feedback for %s rejected: HTTP %s %s", trace_id, exc.code, exc.reason)
        except (OSError, ValueError) as exc:
            logger.warning("agentwatch: feedback for %s not sent: %r", trace_id, exc)
        COUNTERS.add("feedback_failed")
        return False
