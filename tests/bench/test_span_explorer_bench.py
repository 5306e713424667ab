"""``bench.span_explorer`` at a tiny size: its store fills, every question answers with figures, and
the results file says what was run."""

from __future__ import annotations

import json
from pathlib import Path

from bench import span_explorer


def test_span_explorer_bench_measures_every_question(tmp_path: Path) -> None:
    out = tmp_path / "span_explorer"
    assert span_explorer.main(["--spans", "3000", "--repeats", "1", "--label", "tiny", "--out", str(out)]) == 0
    run = json.loads(out.with_suffix(".json").read_text())["tiny"]
    figures = run["sizes"]["3000"]
    assert figures["spans"] == 3000 and set(figures["store"]) == set(span_explorer.cases({"start": 0, "end": 1}))
    assert all(f["p95_ms"] > 0 for f in figures["store"].values())
    assert "failures_by_tool_24h" in out.with_suffix(".md").read_text()
