"""Engine metrics scraper: LLM engines' Prometheus ``/metrics`` into ``engine_metrics``.

Targets come from ``AGENTWATCH_SCRAPE_TARGETS`` (``name=url`` or ``name=url@project``,
comma-separated; project "default" when absent) and from ``POST /api/engines`` at runtime
(kept in the ``engines`` table, read again every cycle). Only vLLM's metric names
(``vllm:*``) are kept: they are what the engine page reads, and the simulated engine
exports the same names. A target that is down is logged when it goes down and when it
comes back, never every cycle; the scraper itself never stops on an error.

Every request goes through ``collector.engines.scrape_guard``: the target's host is resolved and
checked at each scrape (loopback, ``AGENTWATCH_SCRAPE_ALLOWED_HOSTS`` and the configured
targets' hosts only; link-local and metadata addresses never), the checked address is the one
connected to, redirects are not followed, and the response is bounded in size and time. Why
a target failed last is kept in ``status`` and shown by ``GET /api/admin/engines``.
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx
from prometheus_client.parser import text_string_to_metric_families

from agentwatch_platform.collector.engines.scrape_guard import HostPolicy, TargetRefused, fetch_metrics
from agentwatch_platform.collector.storage.base import Store, StoreError
from agentwatch_platform.collector.storage.sql import engines as engines_sql

if TYPE_CHECKING:
    from agentwatch_platform.collector.settings import Settings

log = logging.getLogger(__name__)

DEFAULT_PROJECT = "default"
KEEP_PREFIXES = ("vllm:",)
ENGINE_COLUMNS = ("project", "engine", "ts", "metric", "labels", "value")
_PROJECT = re.compile(r"^[A-Za-z0-9_.-]+$")

Sample = tuple[str, dict[str, str], float]


@dataclass(frozen=True)
class Target:
    name: str
    url: str
    project: str = DEFAULT_PROJECT


def parse_targets(text: str) -> list[Target]:
    """``name=url[@project],...``; a URL without a path gets ``/metrics``."""
    targets = []
    for entry in filter(None, (part.strip() for part in text.split(","))):
        name, sep, rest = entry.partition("=")
        if not sep or not name.strip() or not rest.strip():
            raise ValueError(f"AGENTWATCH_SCRAPE_TARGETS: expected name=url[@project], got {entry!r}")
        url, project = _split_project(rest.strip())
        targets.append(Target(name.strip(), _metrics_url(url), project))
    return targets


def _split_project(text: str) -> tuple[str, str]:
    url, sep, project = text.rpartition("@")
    if sep and _PROJECT.match(project) and "://" in url:
        return url, project
    return text, DEFAULT_PROJECT


def _metrics_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"AGENTWATCH_SCRAPE_TARGETS: {url!r} is not an http(s) URL")
    return url if parts.path not in ("", "/") else url.rstrip("/") + "/metrics"


def target_hosts(targets: list[Target]) -> list[str]:
    """Host names of configured targets: the operator's configuration is trusted to name them."""
    return [host for t in targets if (host := urlsplit(t.url).hostname)]


def register_engine(store: Store, project: str, name: str, url: str) -> None:
    """Add (or re-point) an engine for the scraper's next cycle."""
    store.insert_rows(
        "engines", ("project", "engine", "url", "updated_at"), [(project, name, _metrics_url(url), time.time())]
    )


def parse_metrics(text: str, *, prefixes: tuple[str, ...] = KEEP_PREFIXES) -> list[Sample]:
    """The samples whose name starts with one of ``prefixes``; NaN and infinities dropped."""
    samples = []
    for family in text_string_to_metric_families(text):
        if not family.name.startswith(prefixes):
            continue
        for sample in family.samples:
            if math.isfinite(sample.value):
                samples.append((sample.name, dict(sample.labels), float(sample.value)))
    return samples


class EngineScraper:
    """Scrapes every target each ``interval_s``; an async context manager with a lifetime."""

    def __init__(
        self,
        store: Store,
        targets: list[Target],
        interval_s: float = 5.0,
        *,
        timeout_s: float | None = None,
        policy: HostPolicy | None = None,
        max_bytes: int = 4 * 1024 * 1024,
        may_scrape: Callable[[], bool] | None = None,
    ) -> None:
        self.store = store
        self.targets = list(targets)
        self.interval_s = interval_s
        self.timeout_s = timeout_s if timeout_s is not None else max(1.0, min(interval_s, 10.0))
        self.policy = (
            policy if policy is not None else HostPolicy.from_setting("", configured_hosts=target_hosts(self.targets))
        )
        self.max_bytes = max_bytes
        self.may_scrape = may_scrape  # whether this collector holds the scraping role (collector.roles)
        self.status: dict[tuple[str, str], dict[str, Any]] = {}  # (project, engine) -> {"ok", "error", "at"}
        self.errors: Counter[str] = Counter()
        self.last_scrape: dict[tuple[str, str], float] = {}
        self._down: set[tuple[str, str]] = set()
        self._task: asyncio.Task[None] | None = None
        self._client: httpx.AsyncClient | None = None

    @classmethod
    def from_settings(
        cls,
        store: Store,
        settings: Settings,
        *,
        policy: HostPolicy | None = None,
        may_scrape: Callable[[], bool] | None = None,
    ) -> EngineScraper:
        targets = parse_targets(settings.scrape_targets)
        policy = policy or HostPolicy.from_setting(
            settings.scrape_allowed_hosts, configured_hosts=target_hosts(targets)
        )
        return cls(
            store,
            targets,
            settings.scrape_interval_s,
            policy=policy,
            max_bytes=settings.scrape_max_bytes,
            may_scrape=may_scrape,
        )

    async def __aenter__(self) -> EngineScraper:
        self._client = httpx.AsyncClient(timeout=self.timeout_s, follow_redirects=False, trust_env=False)
        self._task = asyncio.create_task(self._loop(), name="agentwatch-engine-scraper")
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop scraping; safe to call twice."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    async def _loop(self) -> None:
        while True:
            started = time.monotonic()
            try:
                if self.may_scrape is None or self.may_scrape():
                    await self.scrape_once()
            except Exception:  # a bug here must not end scraping for good
                self.errors["internal"] += 1
                log.exception("engine scraper: cycle failed")
            await asyncio.sleep(max(0.0, self.interval_s - (time.monotonic() - started)))

    async def scrape_once(self) -> int:
        """One cycle over all targets; returns the number of samples stored."""
        targets = await self._all_targets()
        if self._client is not None:
            results = await asyncio.gather(*(self._scrape(self._client, t) for t in targets))
        else:
            async with httpx.AsyncClient(timeout=self.timeout_s, follow_redirects=False, trust_env=False) as client:
                results = await asyncio.gather(*(self._scrape(client, t) for t in targets))
        rows = [row for batch in results for row in batch]
        if rows:
            try:
                await asyncio.to_thread(self.store.insert_rows, "engine_metrics", ENGINE_COLUMNS, rows)
            except StoreError as exc:
                self.errors["store"] += 1
                log.warning("engine scraper: could not store %d samples: %s", len(rows), exc)
                return 0
        return len(rows)

    async def _all_targets(self) -> list[Target]:
        """Configured targets, then those registered through the API (these win on a clash)."""
        found = {(t.project, t.name): t for t in self.targets}
        try:
            registered = await asyncio.to_thread(self.store.query, engines_sql.ENGINES_ALL)
        except StoreError as exc:
            self.errors["store"] += 1
            log.warning("engine scraper: could not read registered engines: %s", exc)
            registered = []
        found.update({(r["project"], r["engine"]): Target(r["engine"], r["url"], r["project"]) for r in registered})
        return list(found.values())

    async def _scrape(self, client: httpx.AsyncClient, target: Target) -> list[tuple[Any, ...]]:
        key = (target.project, target.name)
        try:
            text = await fetch_metrics(
                client, self.policy, target.url, max_bytes=self.max_bytes, timeout_s=self.timeout_s
            )
            samples = parse_metrics(text)
        except (
            httpx.HTTPError,
            httpx.InvalidURL,
            ValueError,
        ) as exc:  # InvalidURL is no HTTPError; TargetRefused is a ValueError
            self._mark_down(key, target, exc)
            return []
        if key in self._down:
            self._down.discard(key)
            log.info("engine scraper: %s (%s) is back", target.name, target.url)
        now = time.time()
        self.last_scrape[key] = now
        self.status[key] = {"ok": True, "error": "", "at": now}
        return [(target.project, target.name, now, metric, labels, value) for metric, labels, value in samples]

    def _mark_down(self, key: tuple[str, str], target: Target, exc: Exception) -> None:
        self.errors[target.name] += 1
        reason = str(exc) if isinstance(exc, TargetRefused) else f"{type(exc).__name__}: {exc}"
        self.status[key] = {"ok": False, "error": reason[:500] or type(exc).__name__, "at": time.time()}
        if key not in self._down:
            self._down.add(key)
            log.warning("engine scraper: cannot scrape %s (%s): %s", target.name, target.url, exc)
