"""feedback(): POST to <endpoint>/api/runs/{trace_id}/feedback on a real local receiver."""

from __future__ import annotations

import json

import agentwatch
import pytest

from tests.sdk.servers import OtlpReceiver
from tests.sdk.spans import Spans
from tests.support.ports import free_port

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"


def test_feedback_posts_json_with_the_key(receiver: OtlpReceiver) -> None:
    agentwatch.init(endpoint=receiver.url, api_key="aw_fb", instrument_openai=False)
    assert agentwatch.feedback(TRACE_ID, score=0.8, label="helpful", comment="good", source="eval") is True
    request = next(r for r in receiver.requests if r["path"].endswith("/feedback"))
    assert request["path"] == f"/api/runs/{TRACE_ID}/feedback"
    assert request["headers"]["Authorization"] == "Bearer aw_fb"
    assert json.loads(request["body"]) == {"score": 0.8, "label": "helpful", "comment": "good", "source": "eval"}


def test_feedback_for_a_run_handle_from_the_environment(
    receiver: OtlpReceiver, spans: Spans, monkeypatch: pytest.MonkeyPatch
) -> None:
    with agentwatch.run("answer") as run:
        pass
    agentwatch.shutdown()
    monkeypatch.setenv("AGENTWATCH_ENDPOINT", receiver.url)  # later, from another part of the app
    assert agentwatch.feedback(run, score=1) is True
    assert receiver.requests[-1]["path"] == f"/api/runs/{run.trace_id}/feedback"


def test_feedback_never_raises_for_network_or_server_problems() -> None:
    before = agentwatch.stats()["feedback_failed"]
    agentwatch.init(endpoint=f"http://127.0.0.1:{free_port()}", instrument_openai=False)
    assert agentwatch.feedback(TRACE_ID, score=0.1, timeout_s=1) is False
    with OtlpReceiver(statuses=[401]) as receiver:
        agentwatch.shutdown()
        agentwatch.init(endpoint=receiver.url, instrument_openai=False)
        assert agentwatch.feedback(TRACE_ID, label="bad") is False
    assert agentwatch.stats()["feedback_failed"] == before + 2


@pytest.mark.parametrize(
    ("run_id", "kwargs", "message"),
    [
        ("not-a-trace", {"score": 1}, "32 hex"),
        ("0" * 32, {"score": 1}, "tracing was off"),
        (TRACE_ID, {"score": "high"}, "score"),
        (TRACE_ID, {"score": 1, "source": "robot"}, "source"),
        (TRACE_ID, {}, "at least one"),
        (TRACE_ID, {"comment": "x" * 10_001}, "at most"),
    ],
)
def test_bad_arguments_raise_value_error(run_id: str, kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        agentwatch.feedback(run_id, **kwargs)  # type: ignore[arg-type]


def test_feedback_for_a_run_not_stored_yet_is_sent_again_until_it_is() -> None:
    """The collector answers 404 until the run's spans are stored (feedback often follows a run at once)."""
    with OtlpReceiver(statuses=[404, 404]) as receiver:
        agentwatch.init(endpoint=receiver.url, instrument_openai=False)
        assert agentwatch.feedback(TRACE_ID, score=1.0, timeout_s=5) is True
        assert [r["path"] for r in receiver.requests].count(f"/api/runs/{TRACE_ID}/feedback") == 3
    with OtlpReceiver(statuses=[404] * 10) as receiver:
        agentwatch.shutdown()
        agentwatch.init(endpoint=receiver.url, instrument_openai=False)
        assert agentwatch.feedback(TRACE_ID, score=1.0, timeout_s=0.2) is False  # no run by the deadline
