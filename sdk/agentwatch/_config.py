"""The SDK's configuration: argument, then ``AGENTWATCH_*`` environment variable, then default.

Every variable the SDK reads is listed in ``VARIABLES`` below, with its default and meaning;
docs/configuration.md's table lists it. Values are read by ``agentwatch.envconfig`` (the collector and
the dashboard read theirs with it too). A bad argument raises ``ValueError`` naming it; a bad
environment value is logged and the default is used, so a typo in a deployment never stops
the agent. SDK-only tuning knobs carry an ``AGENTWATCH_SDK_`` prefix so that they never collide
with the collector's variables of the same process environment.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from agentwatch.envconfig import env_value_or_default

logger = logging.getLogger("agentwatch")

DEFAULT_ENDPOINT = "http://127.0.0.1:4318"

# (variable, init() argument, default, meaning)
VARIABLES: tuple[tuple[str, str, str, str], ...] = (
    ("AGENTWATCH_ENDPOINT", "endpoint", DEFAULT_ENDPOINT, "collector base URL; spans go to <endpoint>/v1/traces"),
    ("AGENTWATCH_API_KEY", "api_key", "", "project API key, sent as 'Authorization: Bearer <key>'"),
    ("AGENTWATCH_PROJECT", "project", "default", "project name (resource attribute agentwatch.project)"),
    ("AGENTWATCH_SERVICE_NAME", "service_name", "agent", "OpenTelemetry service.name of this process"),
    (
        "AGENTWATCH_SERVICE_VERSION",
        "service_version",
        "",
        "the agent's version (OpenTelemetry service.version): runs are compared per version",
    ),
    (
        "AGENTWATCH_CAPTURE_CONTENT",
        "capture_content",
        "false",
        "record prompts, completions, tool arguments and results (redacted)",
    ),
    ("AGENTWATCH_SAMPLE_RATE", "sample_rate", "1.0", "fraction of runs (traces) recorded, 0.0 to 1.0"),
    ("AGENTWATCH_PRICES_FILE", "prices_file", "", "price overrides (JSON/YAML) for SDK-side cost and budgets"),
    ("AGENTWATCH_SDK_ENABLED", "enabled", "true", "false turns the SDK into a pass-through (no spans, no export)"),
    (
        "AGENTWATCH_SDK_QUEUE_SIZE",
        "max_queue_size",
        "8192",
        "spans buffered for export; beyond it spans are dropped and counted",
    ),
    ("AGENTWATCH_SDK_BATCH_SIZE", "max_export_batch_size", "512", "spans per export request"),
    (
        "AGENTWATCH_SDK_EXPORT_INTERVAL_S",
        "export_interval_s",
        "0.25",
        "longest a span waits for others to share its export request",
    ),
    ("AGENTWATCH_SDK_EXPORT_TIMEOUT_S", "export_timeout_s", "3.0", "timeout of one export request"),
    ("AGENTWATCH_SDK_EXPORT_RETRIES", "export_retries", "3", "retries of a failed export (exponential backoff)"),
    ("AGENTWATCH_SDK_SHUTDOWN_TIMEOUT_S", "shutdown_timeout_s", "3.0", "longest flush at exit or shutdown()"),
)


@dataclass(frozen=True)
class Config:
    """Resolved settings of one ``init()``; immutable so workers can read it without locks."""

    endpoint: str = DEFAULT_ENDPOINT
    api_key: str = ""
    project: str = "default"
    service_name: str = "agent"
    service_version: str = ""
    capture_content: bool = False
    sample_rate: float = 1.0
    prices_file: str = ""
    enabled: bool = True
    max_queue_size: int = 8192
    max_export_batch_size: int = 512
    export_interval_s: float = 0.25
    export_timeout_s: float = 3.0
    export_retries: int = 3
    shutdown_timeout_s: float = 3.0
    redact: Callable[[str], str] | None = field(default=None, compare=False)
    instrument_openai: bool = True
    max_content_chars: int = 4096

    @property
    def traces_url(self) -> str:
        return self.endpoint.rstrip("/") + "/v1/traces"

    @property
    def headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/x-protobuf"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers


def _validate(name: str, value: object) -> None:
    """Range checks shared by arguments and environment values."""
    if name == "sample_rate" and not 0.0 <= float(value) <= 1.0:  # type: ignore[arg-type]
        raise ValueError("must be between 0.0 and 1.0")
    if name in ("max_queue_size", "max_export_batch_size") and int(value) < 1:  # type: ignore[call-overload]
        raise ValueError("must be at least 1")
    if name == "export_retries" and int(value) < 0:  # type: ignore[call-overload]
        raise ValueError("must not be negative")
    if name == "max_content_chars" and int(value) < 16:  # type: ignore[call-overload]
        raise ValueError("must be at least 16")
    if name.endswith("_s") and float(value) <= 0:  # type: ignore[arg-type]
        raise ValueError("must be positive")
    if name == "endpoint" and not str(value).startswith(("http://", "https://")):
        raise ValueError("must start with http:// or https://")


def _from_env(env: str, name: str, default: object) -> object:
    return env_value_or_default(env, default, check=functools.partial(_validate, name), log=logger)


def resolve(**arguments: object) -> Config:
    """Build a ``Config``: arguments that are not None win, then the environment, then defaults."""
    defaults = Config()
    values: dict[str, object] = {}
    for env, name, _default, _doc in VARIABLES:
        arg = arguments.pop(name, None)
        if arg is not None:
            values[name] = _check_argument(name, arg, getattr(defaults, name))
        else:
            values[name] = _from_env(env, name, getattr(defaults, name))
    for name, arg in arguments.items():  # options without a variable (redact, instrument_openai, ...)
        if not hasattr(defaults, name):
            raise TypeError(f"init() got an unexpected keyword argument {name!r}")
        if arg is not None:
            default = getattr(defaults, name)
            values[name] = arg if default is None else _check_argument(name, arg, default)
    if values.get("redact") is not None and not callable(values["redact"]):
        raise ValueError("redact: must be a callable taking and returning a str")
    return Config(**values)  # type: ignore[arg-type]


def _check_argument(name: str, value: object, default: object) -> object:
    if isinstance(default, bool) and not isinstance(value, bool):
        raise ValueError(f"{name}: expected a bool, got {value!r}")
    if isinstance(default, int | float) and not isinstance(default, bool):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"{name}: expected a number, got {value!r}")
        value = type(default)(value)
    if isinstance(default, str) and not isinstance(value, str):
        raise ValueError(f"{name}: expected a string, got {value!r}")
    try:
        _validate(name, value)
    except ValueError as exc:
        raise ValueError(f"{name}={value!r}: {exc}") from None
    return value
