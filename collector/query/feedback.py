"""Feedback on runs: storing a score, label or comment for a stored run of the project
(``POST /api/runs/{trace_id}/feedback``); a run's feedback is read with the run (``service.get_run``)."""

from __future__ import annotations

import math
import time
import uuid

from agentwatch_api.schemas import FeedbackIn, FeedbackOut
from agentwatch_platform.collector.query.ranges import InvalidQuery
from agentwatch_platform.collector.query.runs import valid_trace_id
from agentwatch_platform.collector.storage.base import Store
from agentwatch_platform.collector.storage.sql import feedback as feedback_sql

MAX_FEEDBACK_SCORE = 1e6  # any rating scale fits; two scores of 1e308 averaged to inf on the dashboard


def add_feedback(
    store: Store, project: str, trace_id: str, feedback: FeedbackIn, *, now: float | None = None
) -> FeedbackOut | None:
    """Store one piece of feedback for a run of this project; None when no span of that run is
    stored in this project (a mistyped id, or another project's run: nothing is stored for it).
    Feedback sent right after a run can come before its spans: the SDK's ``feedback`` exports
    them and retries."""
    if not store.query(feedback_sql.TRACE_EXISTS, {"project": project, "trace_id": valid_trace_id(trace_id)})[0]["n"]:
        return None
    if feedback.score is not None and not (math.isfinite(feedback.score) and abs(feedback.score) <= MAX_FEEDBACK_SCORE):
        raise InvalidQuery(f"score must be a finite number between -{MAX_FEEDBACK_SCORE:g} and {MAX_FEEDBACK_SCORE:g}")
    out = FeedbackOut(
        **feedback.model_dump(),
        feedback_id=uuid.uuid4().hex,
        trace_id=valid_trace_id(trace_id),
        created_at=time.time() if now is None else now,
    )
    row = [project, out.trace_id, out.feedback_id, out.score, out.label, out.comment, out.source, out.created_at]
    store.insert_rows(
        "feedback", ("project", "trace_id", "feedback_id", "score", "label", "comment", "source", "created_at"), [row]
    )
    return out
