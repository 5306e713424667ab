"""``bench.query_plan`` at a tiny size: it records the overview's statements and times each run,
planned and parsed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import query_plan

pytestmark = pytest.mark.slow  # a benchmark's fill and its statements timed (make test runs it, make quick not)


def test_query_plan_bench_times_every_statement_of_an_overview_three_ways(tmp_path: Path) -> None:
    out = tmp_path / "query_plan"
    assert query_plan.main(["--spans", "3000", "--insert-spans", "1000", "--repeats", "1", "--out", str(out)]) == 0
    (result,) = json.loads(out.with_suffix(".json").read_text())["results"]
    assert result["spans"] == 3000 and result["parts"]["spans"] >= 1
    statements = result["statements"]
    assert len(statements) >= 4  # the figures, the run heads, the run totals, the run states at least
    for row in statements:
        assert all(row[f"{variant}_cpu_ms"] > 0 for variant in query_plan.VARIANTS), row
    assert "Planning is" in out.with_suffix(".md").read_text()
