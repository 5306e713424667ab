"""Configuration: argument, then AGENTWATCH_* variable, then default."""

from __future__ import annotations

import logging

import pytest
from agentwatch import ENVIRONMENT_VARIABLES
from agentwatch._config import DEFAULT_ENDPOINT, Config, resolve


def test_defaults() -> None:
    config = resolve()
    assert config.endpoint == DEFAULT_ENDPOINT == "http://127.0.0.1:4318"
    assert config.traces_url == "http://127.0.0.1:4318/v1/traces"
    assert config.capture_content is False and config.sample_rate == 1.0
    assert "Authorization" not in config.headers


def test_environment_then_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTWATCH_ENDPOINT", "http://collector:4318/")
    monkeypatch.setenv("AGENTWATCH_API_KEY", "aw_env")
    monkeypatch.setenv("AGENTWATCH_PROJECT", "env-project")
    monkeypatch.setenv("AGENTWATCH_SERVICE_NAME", "env-svc")
    monkeypatch.setenv("AGENTWATCH_CAPTURE_CONTENT", "yes")
    monkeypatch.setenv("AGENTWATCH_SAMPLE_RATE", "0.25")
    config = resolve()
    assert (config.endpoint, config.project, config.service_name) == (
        "http://collector:4318/",
        "env-project",
        "env-svc",
    )
    assert config.capture_content is True and config.sample_rate == 0.25
    assert config.headers["Authorization"] == "Bearer aw_env"
    assert config.traces_url == "http://collector:4318/v1/traces"
    overridden = resolve(project="arg-project", sample_rate=1, capture_content=False)
    assert overridden.project == "arg-project" and overridden.sample_rate == 1.0
    assert overridden.capture_content is False


def test_bad_environment_value_logs_and_falls_back(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("AGENTWATCH_SAMPLE_RATE", "lots")
    monkeypatch.setenv("AGENTWATCH_CAPTURE_CONTENT", "maybe")
    with caplog.at_level(logging.WARNING, logger="agentwatch"):
        config = resolve()
    assert config.sample_rate == 1.0 and config.capture_content is False
    assert "AGENTWATCH_SAMPLE_RATE" in caplog.text and "AGENTWATCH_CAPTURE_CONTENT" in caplog.text


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"sample_rate": 1.5}, "sample_rate"),
        ({"sample_rate": "half"}, "sample_rate"),
        ({"endpoint": "collector:4318"}, "endpoint"),
        ({"capture_content": "yes"}, "capture_content"),
        ({"max_queue_size": 0}, "max_queue_size"),
        ({"instrument_openai": "yes"}, "instrument_openai"),
        ({"max_content_chars": 0}, "max_content_chars"),
    ],
)
def test_bad_argument_raises_naming_it(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        resolve(**kwargs)


def test_unknown_option_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="colour"):
        resolve(colour="red")


def test_every_variable_is_documented_and_maps_to_a_setting() -> None:
    names = [env for env, *_ in ENVIRONMENT_VARIABLES]
    assert len(names) == len(set(names))
    for env, option, _default, doc in ENVIRONMENT_VARIABLES:
        assert env.startswith("AGENTWATCH_") and doc
        assert hasattr(Config, option), option
    for required in ("ENDPOINT", "API_KEY", "PROJECT", "SERVICE_NAME", "CAPTURE_CONTENT", "SAMPLE_RATE"):
        assert f"AGENTWATCH_{required}" in names
