"""``agentwatch.envconfig``: one reading of ``AGENTWATCH_*`` for the SDK, the collector and the dashboard."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from agentwatch.envconfig import EnvError, env_value, env_value_or_default, parse_as


@pytest.mark.parametrize(
    ("raw", "default", "expected"),
    [
        (" Yes ", False, True),
        ("off", True, False),
        ("42", 7, 42),
        (" 2.5", 1.0, 2.5),
        ("x", "", "x"),
        ("/d", Path("."), Path("/d")),
    ],
)
def test_a_value_takes_the_type_of_its_default(raw: str, default: object, expected: object) -> None:
    value = parse_as(raw, default)
    assert value == expected and type(value) is type(expected)


@pytest.mark.parametrize(
    ("raw", "default", "problem"),
    [("maybe", True, "expected true or false"), ("4.5", 1, "expected an integer"), ("lots", 1.0, "expected a number")],
)
def test_a_bad_value_names_the_variable_and_what_was_expected(raw: str, default: object, problem: str) -> None:
    with pytest.raises(EnvError, match=problem) as caught:
        env_value("AGENTWATCH_X", default, environ={"AGENTWATCH_X": raw})
    assert str(caught.value).startswith(f"AGENTWATCH_X={raw!r}: ") and caught.value.variable == "AGENTWATCH_X"


def test_unset_or_empty_is_the_default_unless_empty_is_a_value() -> None:
    assert (
        env_value("AGENTWATCH_X", 3, environ={}) == 3
        and env_value("AGENTWATCH_X", 3, environ={"AGENTWATCH_X": ""}) == 3
    )
    assert env_value("AGENTWATCH_X", "auto", environ={"AGENTWATCH_X": ""}, empty_is_unset=False) == ""
    with pytest.raises(EnvError, match="expected an integer"):
        env_value("AGENTWATCH_X", 3, environ={"AGENTWATCH_X": ""}, empty_is_unset=False)


def test_a_range_check_fails_like_a_bad_type_and_the_lenient_reader_logs_it(caplog: pytest.LogCaptureFixture) -> None:
    def positive(value: float) -> None:
        if value <= 0:
            raise ValueError("must be positive")

    with pytest.raises(EnvError, match="must be positive"):
        env_value("AGENTWATCH_X", 1.0, check=positive, environ={"AGENTWATCH_X": "-1"})
    with caplog.at_level(logging.WARNING, logger="t"):
        assert (
            env_value_or_default(
                "AGENTWATCH_X", 1.0, check=positive, log=logging.getLogger("t"), environ={"AGENTWATCH_X": "-1"}
            )
            == 1.0
        )
    assert "AGENTWATCH_X='-1': must be positive; using 1.0" in caplog.text
