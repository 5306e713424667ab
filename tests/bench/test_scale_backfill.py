"""bench.scale's backfill phase runs the closer's first pass over the days it filled, and reports it."""

from __future__ import annotations

import pytest

from bench import ingest, scale

pytestmark = pytest.mark.slow  # a benchmark's fill (make test runs it, make quick not)


def test_the_backfill_phase_closes_every_day_it_filled() -> None:
    spans_per_day = 10 * ingest.SPANS_PER_TRACE
    out = scale.phase_backfill(3, spans_per_day)
    assert out["spans"] == 3 * spans_per_day
    assert 30 <= out["run_rows"] <= 60  # ten runs a day: a row per run and hour it has spans in
    assert out["minute_rows_written"] >= 30  # every minute a run starts in, on each of the three days
    assert out["pass_peak_anon_mb"] >= out["anon_before_mb"] > 0
    page = scale.markdown(
        {
            "command": "python -m bench.scale --phases backfill",
            "machine": "m",
            "backfill": out,
            "backfill_measured": "the command above",
        }
    )
    assert "## The run closer's backfill" in page and f"| {out['minute_rows_written']} |" in page
