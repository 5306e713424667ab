"""``app.state`` of the collector, typed: what every route and component may reach, in one list.

``create_app`` makes a ``CollectorState`` the app's state (it is Starlette's ``State``, so
``request.app.state.store`` still reads as before) with the collaborators it builds; the
lifespan fills in what exists only while the app runs (``roles`` ... ``gpu_sampler``, None
until then). Every module reads it through ``collector_state(app)``, never ``app.state.x``
(``tests/test_architecture.py`` holds it so). A plugin finds its own there too: its settings
(``plugin_settings[name]``) and the component its lifespan runs (``plugin_components[name]``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from starlette.datastructures import State

if TYPE_CHECKING:  # the modules that build these import this one
    from agentwatch_platform.collector.app import StoreHandle
    from agentwatch_platform.collector.auth.authenticator import Authenticator
    from agentwatch_platform.collector.auth.keys import KeyRing
    from agentwatch_platform.collector.auth.scopes import RouteScopes
    from agentwatch_platform.collector.engines.gpu import GpuSampler
    from agentwatch_platform.collector.engines.scrape_guard import HostPolicy
    from agentwatch_platform.collector.engines.scraper import EngineScraper
    from agentwatch_platform.collector.ingest.freshness import Freshness
    from agentwatch_platform.collector.ingest.otlp.grpc_server import GrpcServer
    from agentwatch_platform.collector.ingest.pipeline import Ingestor
    from agentwatch_platform.collector.ingest.rate_limit import RateLimiter
    from agentwatch_platform.collector.metrics import Metrics
    from agentwatch_platform.collector.query.fleet import FleetCounters
    from agentwatch_platform.collector.roles import Roles
    from agentwatch_platform.collector.settings import EnvSettings, Settings


class CollectorState(State):
    """The collector's ``app.state``; the attributes below are all it holds of its own."""

    settings: Settings
    store: StoreHandle  # the store, opened lazily and reopened (collector.app)
    metrics: Metrics
    ingestor: Ingestor
    keyring: KeyRing
    authenticator: Authenticator  # the key check's cache in front of the key ring
    rate_limiter: RateLimiter
    route_scopes: RouteScopes  # every route's scope, the plugins' included (collector.auth.scopes)
    plugin_settings: dict[str, EnvSettings | None]  # each plugin's own, by its name
    scrape_policy: HostPolicy  # which hosts engines may be scraped at
    clock: Callable[[], float]
    freshness: Freshness  # how far the figures are complete
    deletion_listeners: list[Callable[[str], None]]  # told the project after a deletion of its data
    plugin_components: dict[str, object]  # what each plugin's lifespan runs, by its name, while it runs
    # while the app runs (the lifespan); None before
    admin_token: str | None
    roles: Roles | None
    fleet: FleetCounters | None  # with collectors sharing a store
    grpc_server: GrpcServer | None
    scraper: EngineScraper | None
    gpu_sampler: GpuSampler | None

    def __init__(self, **values: Any) -> None:
        super().__init__()
        for name in ("admin_token", "roles", "fleet", "grpc_server", "scraper", "gpu_sampler"):
            self[name] = None
        for name, value in values.items():
            self[name] = value


def collector_state(app: Any) -> CollectorState:
    """``app.state`` as the collector made it (``app``: the FastAPI app, e.g. ``request.app``)."""
    state = app.state
    assert isinstance(state, CollectorState), "not an app made by collector.app.create_app"
    return state
