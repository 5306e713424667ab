"""Re-pricing: apply the current ``agentwatch.PriceTable`` to spans already stored.

``agentwatch reprice --since 7d`` recomputes the cost of every priced LLM span since then
with today's prices, records the prices used in ``price_versions`` (so a cost can always be
traced to the prices behind it), and rebuilds the run totals and per-minute figures from the
first affected hour and minute on. While a
collector owns the embedded data directory, the command asks it to do the work
(``POST /api/admin/reprice`` with the admin token from the data directory).

On a ClickHouse server shared by collectors that keep ingesting, runs whose spans arrive
during the rebuild of their hour can be counted twice until the next re-price; pause
ingestion for an exact result.
"""

from __future__ import annotations

import argparse
import re
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentwatch_api.client import ApiError, CollectorClient, CollectorError
from agentwatch_api.handshake import running_collector
from agentwatch_platform.collector.settings import Settings
from agentwatch_platform.collector.storage.base import Store, StoreError
from agentwatch_platform.collector.storage.maintenance import rebuild_totals
from agentwatch_platform.collector.storage.sql import reprice as reprice_sql

if TYPE_CHECKING:
    from agentwatch import PriceTable

PRICE_COLUMNS = ("version", "model", "input_per_mtok", "output_per_mtok", "cached_input_per_mtok", "created_at")
_RELATIVE = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86_400}


@dataclass(frozen=True)
class RepriceResult:
    version: str
    since: float
    spans: int  # LLM spans whose model has a price now
    models: list[str]
    unpriced_models: list[str]


def reprice(
    store: Store, prices: PriceTable, *, since: float, project: str = "", now: float | None = None
) -> RepriceResult:
    """Re-price the LLM spans since ``since`` (of one project, or all) and rebuild run totals."""
    params: dict[str, Any] = {"since_ns": int(since * 1e9), "project": project}
    found = store.query(reprice_sql.REPRICE_MODELS, params)
    priced = [(r, p) for r in found if (p := prices.price(r["model"], r["provider"] or None)) is not None]
    if priced:
        _record_prices(store, prices.version, priced, time.time() if now is None else now)
        store.command(reprice_sql.REPRICE_SPANS, params | _price_arrays(priced, prices.version))
        rebuild_totals(store, since=since, project=project)
    return RepriceResult(
        version=prices.version,
        since=since,
        spans=sum(int(r["spans"]) for r, _ in priced),
        models=sorted({r["model"] for r, _ in priced}),
        unpriced_models=sorted({r["model"] for r in found} - {r["model"] for r, _ in priced}),
    )


def _record_prices(store: Store, version: str, priced: list[tuple[dict[str, Any], Any]], now: float) -> None:
    rows = [(version, r["model"], p.input, p.output, p.cached, now) for r, p in priced]
    store.insert_rows("price_versions", PRICE_COLUMNS, rows)


def _price_arrays(priced: list[tuple[dict[str, Any], Any]], version: str) -> dict[str, Any]:
    return {
        "keys": [f"{r['model']}|{r['provider']}" for r, _ in priced],
        "input": [float(p.input) for _, p in priced],
        "cached": [float(p.cached) for _, p in priced],
        "output": [float(p.output) for _, p in priced],
        "version": version,
    }


def price_table(settings: Settings) -> PriceTable:
    """The SDK's price table with the collector's overrides, as ingestion prices with it."""
    from agentwatch import PriceTable

    return PriceTable.from_file(settings.prices_file) if settings.prices_file else PriceTable()


def parse_since(text: str, *, now: float | None = None) -> float:
    """Epoch seconds from ``7d``/``12h``/``30m``/``90s`` ago, an RFC 3339 time or epoch seconds."""
    now = time.time() if now is None else now
    if match := _RELATIVE.match(text.strip()):
        return now - float(match.group(1)) * _UNIT_S[match.group(2)]
    try:
        return float(text)
    except ValueError:
        pass
    try:
        parsed = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"--since: expected 7d, 12h, 30m, an RFC 3339 time or epoch seconds; got {text!r}") from None
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()


# --- command line ----------------------------------------------------------------------------
def register_reprice(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("reprice", help="re-apply the current price table to stored LLM spans")
    p.add_argument("--since", required=True, help="7d, 12h, 30m, an RFC 3339 time or epoch seconds")
    p.add_argument("--project", default="", help="only this project (default: all)")
    p.add_argument("--data-dir", type=Path, default=None, help="the collector's data dir (default .agentwatch)")
    p.set_defaults(func=reprice_command)


def reprice_command(args: argparse.Namespace) -> int:
    try:
        since = parse_since(args.since)
    except ValueError as exc:
        raise SystemExit(f"agentwatch reprice: {exc}") from None
    settings = Settings.from_env(data_dir=args.data_dir)
    try:
        result = _remote_or_local(settings, since, args.project)
    except (StoreError, CollectorError) as exc:
        raise SystemExit(f"agentwatch reprice: {exc}") from None
    print(
        f"Re-priced {result['spans']} LLM spans since {datetime.fromtimestamp(since, UTC):%Y-%m-%d %H:%M:%S} UTC "
        f"with price version {result['version']} ({', '.join(result['models']) or 'no priced models'})."
    )
    if result["unpriced_models"]:
        print(f"No price for: {', '.join(result['unpriced_models'])} (their costs were left as they were).")
    return 0


def _remote_or_local(settings: Settings, since: float, project: str) -> dict[str, Any]:
    running = None if settings.clickhouse_url else running_collector(Path(settings.data_dir))
    if running is not None:
        with CollectorClient(running.url, running.admin_token, timeout_s=600) as client:
            try:
                return client.reprice(since=since, project=project)
            except ApiError as exc:
                raise SystemExit(f"agentwatch reprice: the collector answered {exc.status}: {exc.detail}") from None
    from agentwatch_platform.collector.storage import open_store

    store = open_store(settings)
    try:
        return asdict(reprice(store, price_table(settings), since=since, project=project))
    finally:
        store.close()
