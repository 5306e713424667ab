"""The dashboard's configuration: every ``AGENTWATCH_*`` variable it reads, documented here.

The dashboard reads only the collector's query API, so it needs the collector's URL and
a project API key; it never opens the store's files. Access to the dashboard itself is
gated by a login unless it was started explicitly in open local mode:

- ``AGENTWATCH_DASHBOARD_PASSWORD`` set: the login asks for this password, and the
  dashboard then queries with ``AGENTWATCH_API_KEY``.
- no password: the login asks for a project API key, checked against the collector; the
  dashboard then shows that key's project (so one dashboard serves several projects).
- ``AGENTWATCH_DASHBOARD_OPEN=1``: no login, queries with ``AGENTWATCH_API_KEY``; every
  page says so in a banner. Meant for a laptop, never for a shared host.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, fields

from agentwatch.envconfig import ENV_PREFIX, env_value_or_default

DEFAULT_COLLECTOR_URL = "http://127.0.0.1:4318"

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class DashboardConfig:
    collector_url: str = field(
        default=DEFAULT_COLLECTOR_URL, metadata={"env": "COLLECTOR_URL", "doc": "base URL of the collector's query API"}
    )
    api_key: str = field(
        default="",
        metadata={
            "env": "API_KEY",
            "doc": "project API key the dashboard queries with (password and open modes); keys of several projects comma-separated, switched in the sidebar",
        },
    )
    password: str = field(
        default="",
        metadata={
            "env": "DASHBOARD_PASSWORD",
            "doc": "dashboard login password; empty = log in with a project API key",
        },
    )
    open_mode: bool = field(
        default=False,
        metadata={"env": "DASHBOARD_OPEN", "doc": "1 = open local mode: no login, a banner on every page"},
    )
    timeout_s: float = field(
        default=30.0, metadata={"env": "DASHBOARD_TIMEOUT_S", "doc": "timeout of one query to the collector"}
    )
    gpu_hour_usd: float = field(
        default=0.0, metadata={"env": "GPU_HOUR_USD", "doc": "default GPU-hour price for the self-hosted cost"}
    )
    cache_ttl_s: float = field(
        default=5.0, metadata={"env": "DASHBOARD_CACHE_TTL_S", "doc": "how long a query result is reused across reruns"}
    )

    @classmethod
    def from_env(cls) -> DashboardConfig:
        """Read every field from its variable (``agentwatch.envconfig``); a bad value is logged and
        the default kept. A URL loses its trailing slash."""
        values: dict[str, object] = {}
        for f in fields(cls):
            value = env_value_or_default(ENV_PREFIX + f.metadata["env"], f.default, log=logger)
            values[f.name] = value.rstrip("/") if isinstance(value, str) and value.startswith("http") else value
        return cls(**values)  # type: ignore[arg-type]

    @classmethod
    def describe(cls) -> list[tuple[str, str, str]]:
        return [(ENV_PREFIX + f.metadata["env"], str(f.default), f.metadata["doc"]) for f in fields(cls)]

    @property
    def api_keys(self) -> tuple[str, ...]:
        """``api_key`` split at commas: one key per project the sidebar can switch to."""
        return tuple(k.strip() for k in self.api_key.split(",") if k.strip()) or ("",)

    @property
    def login_mode(self) -> str:
        """``open``, ``password`` or ``key``: what the login page asks for."""
        if self.open_mode:
            return "open"
        return "password" if self.password else "key"
