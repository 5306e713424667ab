"""SDK fixtures: an initialised SDK whose spans are also kept in memory, and real servers."""

from __future__ import annotations

from collections.abc import Iterator

import agentwatch
import pytest

from tests.sdk.servers import FakeOpenAI, OtlpReceiver
from tests.sdk.spans import Spans, init_with_memory

_ENV = (
    "ENDPOINT",
    "API_KEY",
    "PROJECT",
    "SERVICE_NAME",
    "CAPTURE_CONTENT",
    "SAMPLE_RATE",
    "PRICES_FILE",
    "SDK_ENABLED",
)


@pytest.fixture(autouse=True)
def clean_sdk(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts uninitialised, without AGENTWATCH_* variables, and ends shut down."""
    for name in _ENV:
        monkeypatch.delenv(f"AGENTWATCH_{name}", raising=False)
    agentwatch.shutdown(timeout_s=1)
    yield
    agentwatch.shutdown(timeout_s=1)
    agentwatch.uninstrument_openai()


@pytest.fixture
def spans() -> Spans:
    return init_with_memory()


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as server:
        yield server  # type: ignore[misc]


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server  # type: ignore[misc]
