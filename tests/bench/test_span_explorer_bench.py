"""``bench.span_explorer`` at a tiny size: its store fills, every question answers with figures, and
the results file says what was run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import span_explorer

pytestmark = pytest.mark.slow  # a benchmark's fill (make test runs it, make quick not)


def test_span_explorer_bench_measures_every_question(tmp_path: Path) -> None:
    out = tmp_path / "span_explorer"
    assert span_explorer.main(["--spans", "3000", "--repeats", "1", "--label", "tiny", "--out", str(out)]) == 0
    run = json.loads(out.with_suffix(".json").read_text())["tiny"]
    figures = run["sizes"]["3000"]
    assert figures["spans"] == 3000 and set(figures["store"]) == set(span_explorer.cases({"start": 0, "end": 1}))
    assert all(f["p95_ms"] > 0 for f in figures["store"].values())
    assert "failures_by_tool_24h" in out.with_suffix(".md").read_text()


def test_a_kept_store_is_measured_again_without_a_refill(tmp_path: Path) -> None:
    """``--store-dir`` keeps the store and its window: a second run (after a change) measures the
    same spans over the same day, and a run asking another size is refused."""
    out, store = tmp_path / "span_explorer", tmp_path / "store"
    args = ["--spans", "3000", "--repeats", "1", "--out", str(out), "--store-dir", str(store)]
    assert span_explorer.main([*args, "--label", "before"]) == 0
    window = json.loads((store / "window.json").read_text())
    assert span_explorer.main([*args, "--label", "after"]) == 0
    assert json.loads((store / "window.json").read_text()) == window
    runs = json.loads(out.with_suffix(".json").read_text())
    assert runs["before"]["sizes"]["3000"]["build_s"] == runs["after"]["sizes"]["3000"]["build_s"]
    assert runs["after"]["sizes"]["3000"]["spans"] == 3000
    with pytest.raises(SystemExit, match="holds a store of 3,000 spans"):
        span_explorer.main(["--spans", "6000", "--repeats", "1", "--out", str(out), "--store-dir", str(store)])
