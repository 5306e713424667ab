"""Engines registered through the API: validated, capped per project, deletable, audited.

Registering a scrape target makes the collector send requests on the caller's say, so it is
an ``admin`` action (``collector.auth.scopes``) and the URL must pass ``collector.engines.scrape_guard``
(also re-checked at every scrape). A project holds at most
``AGENTWATCH_MAX_ENGINES_PER_PROJECT`` registered engines; re-pointing one it has is no new one.
"""

from __future__ import annotations

import json
import time

from agentwatch_platform.collector.engines.scrape_guard import HostPolicy, TargetRefused
from agentwatch_platform.collector.engines.scraper import parse_targets, register_engine, target_hosts
from agentwatch_platform.collector.errors import CollectorError
from agentwatch_platform.collector.settings import Settings
from agentwatch_platform.collector.storage.base import Store
from agentwatch_platform.collector.storage.sql import admin as admin_sql


class EngineLimit(CollectorError):
    """The project already has as many engines as it may register."""


def policy_for(settings: Settings) -> HostPolicy:
    return HostPolicy.from_setting(
        settings.scrape_allowed_hosts, configured_hosts=target_hosts(parse_targets(settings.scrape_targets))
    )


def add_engine(
    store: Store, settings: Settings, project: str, name: str, url: str, *, actor: str, policy: HostPolicy | None = None
) -> None:
    """Check ``url`` (``TargetRefused``) and the cap (``EngineLimit``), register, audit."""
    (policy or policy_for(settings)).check(url)
    others = int(store.query(admin_sql.COUNT_ENGINES, {"project": project, "engine": name})[0]["n"])
    if others >= settings.max_engines_per_project:
        raise EngineLimit(
            f"project {project!r} has {others} engines, the most it may register (AGENTWATCH_MAX_ENGINES_PER_PROJECT); delete one first"
        )
    register_engine(store, project, name, url)
    audit(store, project, actor, "engine.add", name, {"url": url})


def delete_engine(store: Store, project: str, name: str, *, actor: str) -> bool:
    """Stop scraping a registered engine; False when the project has none of that name."""
    if not int(store.query(admin_sql.ENGINE_EXISTS, {"project": project, "engine": name})[0]["n"]):
        return False
    store.command(admin_sql.DELETE_ENGINE, {"project": project, "engine": name})
    audit(store, project, actor, "engine.delete", name, {})
    return True


def audit(store: Store, project: str, actor: str, action: str, target: str, detail: dict[str, object]) -> None:
    """One admin action in ``audit_log`` (who, what, on what; never a secret)."""
    store.command(
        admin_sql.INSERT_AUDIT,
        {
            "project": project,
            "at_ms": int(time.time() * 1000),
            "actor": actor,
            "action": action,
            "target": target,
            "detail": json.dumps(detail, separators=(",", ":"), default=str),
        },
    )


__all__ = ["EngineLimit", "TargetRefused", "add_engine", "audit", "delete_engine", "policy_for"]
