"""Re-pricing stored spans with the SDK's price table: spans, run totals, versions, CLI."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest
from agentwatch import PriceTable
from agentwatch.cli import main

from agentwatch_platform.collector.query import runs as runs_query
from agentwatch_platform.collector.query.reprice import parse_since, reprice
from agentwatch_platform.collector.storage.base import Store
from tests.collector.factories import agent_run
from tests.collector.ingest_helpers import serve, settings_for

NOW = time.time()
OVERRIDES = {"sim-small": {"input": 1.0, "output": 2.0, "cached": 0.5}}


def _seed(store: Store, project: str = "p1", *, now: float = NOW) -> dict[str, list]:
    """Runs 10 and 8 minutes before ``now`` and one 2 hours before (the CLI's ``--since 1h`` reads
    the clock: its tests pass the time they run at, which a loaded machine puts long after import)."""
    recent = agent_run(project=project, start_s=now - 600, steps=2, tokens=(1000, 100), cost_per_call=0.5)
    recent = [replace(s, cached_tokens=400) if s.kind == "llm" else s for s in recent]
    unknown = agent_run(project=project, start_s=now - 500, steps=1, model="no-such-model-xyz", cost_per_call=0.25)
    old = agent_run(project=project, start_s=now - 7200, steps=1, cost_per_call=0.5)
    for rows in (recent, unknown, old):
        store.insert_spans(rows)
    return {"recent": recent, "unknown": unknown, "old": old}


def _run_cost(store: Store, project: str, trace_id: str, *, now: float = NOW) -> float:
    page = runs_query.list_runs(store, project, start=now - 86_400, end=now + 60, limit=100)
    return next(r.cost_usd for r in page.items if r.trace_id == trace_id)


def test_reprice_updates_spans_runs_and_records_prices(store: Store) -> None:
    runs = _seed(store)
    prices = PriceTable(OVERRIDES, hosted=False)
    result = reprice(store, prices, since=NOW - 3600, now=NOW)
    per_call = ((1000 - 400) * 1.0 + 400 * 0.5 + 100 * 2.0) / 1e6
    assert (result.spans, result.models, result.unpriced_models, result.version) == (
        2,
        ["sim-small"],
        ["no-such-model-xyz"],
        prices.version,
    )
    llm = store.query("SELECT trace_id, cost_usd, price_version FROM spans WHERE kind = 'llm' ORDER BY trace_id")
    by_trace = {r["trace_id"]: r for r in llm}
    assert by_trace[runs["recent"][0].trace_id] == {
        "trace_id": runs["recent"][0].trace_id,
        "cost_usd": pytest.approx(per_call),
        "price_version": prices.version,
    }
    assert by_trace[runs["unknown"][0].trace_id]["cost_usd"] == 0.25  # no price now: left alone
    assert by_trace[runs["old"][0].trace_id]["cost_usd"] == 0.5  # before --since
    assert _run_cost(store, "p1", runs["recent"][0].trace_id) == pytest.approx(2 * per_call)
    assert _run_cost(store, "p1", runs["unknown"][0].trace_id) == pytest.approx(0.25)
    assert runs_query.list_runs(store, "p1", start=NOW - 86_400, end=NOW + 60).total == 3
    recorded = store.query(
        "SELECT version, model, input_per_mtok, output_per_mtok, cached_input_per_mtok FROM price_versions"
    )
    assert recorded == [
        {
            "version": prices.version,
            "model": "sim-small",
            "input_per_mtok": 1.0,
            "output_per_mtok": 2.0,
            "cached_input_per_mtok": 0.5,
        }
    ]


def test_reprice_of_one_project_leaves_the_others(store: Store) -> None:
    mine, theirs = _seed(store, "p1"), _seed(store, "p2")
    reprice(store, PriceTable(OVERRIDES, hosted=False), since=NOW - 3600, project="p1")
    assert _run_cost(store, "p1", mine["recent"][0].trace_id) != pytest.approx(1.0)
    assert _run_cost(store, "p2", theirs["recent"][0].trace_id) == pytest.approx(1.0)


def test_since_accepts_relative_absolute_and_epoch_times() -> None:
    assert parse_since("7d", now=1_000_000) == 1_000_000 - 7 * 86_400
    assert parse_since("90s", now=1_000) == 910
    assert parse_since("2026-01-01T00:00:00Z") == parse_since("2026-01-01T00:00:00") == 1_767_225_600
    assert parse_since("1767225600.5") == 1_767_225_600.5
    with pytest.raises(ValueError, match="--since"):
        parse_since("last tuesday")


def test_cli_reprices_through_a_running_collector(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prices_file = tmp_path / "prices.json"
    prices_file.write_text('{"sim-small": {"input": 1.0, "output": 2.0, "cached": 0.5}}')
    settings = settings_for(tmp_path / "data", prices_file=str(prices_file))
    with serve(settings) as running:
        now = time.time()
        runs = _seed(running.app.state.store, now=now)
        main(["reprice", "--since", "1h", "--data-dir", str(settings.data_dir)])
        cost = _run_cost(running.app.state.store, "p1", runs["recent"][0].trace_id, now=now)
    out = capsys.readouterr().out
    assert "Re-priced 2 LLM spans" in out and "No price for: no-such-model-xyz" in out
    assert cost == pytest.approx(2 * ((1000 - 400) * 1.0 + 400 * 0.5 + 100 * 2.0) / 1e6)


def test_cli_reprices_the_data_dir_directly_and_rejects_bad_times(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from agentwatch_platform.collector.storage import open_store

    settings = settings_for(tmp_path)
    store = open_store(settings)
    _seed(store, now=time.time())
    store.close()
    assert main(["reprice", "--since", "1h", "--data-dir", str(tmp_path)]) == 0
    assert "Re-priced 2 LLM spans" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="--since"):
        main(["reprice", "--since", "soon", "--data-dir", str(tmp_path)])
