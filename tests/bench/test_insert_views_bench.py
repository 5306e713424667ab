"""``bench.insert_views`` at a tiny size: every variant's inserts are timed, and a bad variant is
named before any fill."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import insert_views

pytestmark = pytest.mark.slow  # a benchmark's inserts, each after its views are made again (make test runs it)


def test_insert_views_bench_times_the_inserts_of_every_variant(tmp_path: Path) -> None:
    out = tmp_path / "insert_views"
    variants = "all,no-span_key_minutes_mv+span_key_hours_mv,keys-bare"
    assert insert_views.main(["--insert-spans", "300", "--rounds", "2", "--variants", variants, "--out", str(out)]) == 0
    result = json.loads(out.with_suffix(".json").read_text())
    assert [v["variant"] for v in result["variants"]] == variants.split(",")
    assert all(v["cpu_ms_median"] > 0 and v["cpu_us_per_span"] > 0 for v in result["variants"])
    assert "| keys-bare |" in out.with_suffix(".md").read_text()


def test_a_variant_naming_no_view_is_refused_with_the_views_listed() -> None:
    with pytest.raises(ValueError, match="no view named spans_mv; the views: runs_mv"):
        insert_views.views_of("no-spans_mv")
    assert len(insert_views.views_of("no-span_key_hours_mv")) == len(insert_views.VIEWS) - 1
