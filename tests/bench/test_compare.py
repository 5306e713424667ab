"""The comparison's bookkeeping: target ratios, met/missed, honest 'not measured', profiles."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from bench.compare import (
    AGGREGATES,
    QUESTIONS,
    TARGETS,
    BenchError,
    RssSampler,
    compare,
    disk_bytes,
    first_calls_by_size,
    poll_interval,
    render_markdown,
    render_table,
    summarize_profile,
    table_rows,
    time_question,
    tree_memory_bytes,
)


def _figures(e2e: float, query_s: float, disk_per_span: float, rss: int) -> dict[str, object]:
    questions = {q: {"answer": 1, "median_s": query_s, "p95_s": query_s * 2} for q in QUESTIONS}
    return {
        "measured": True,
        "ingest": {"accepted_spans_per_s": e2e * 2, "e2e_spans_per_s": e2e},
        "questions": questions,
        "peak_rss_bytes": rss,
        "peak_anon_bytes": rss // 2,
        "disk_bytes_per_span": disk_per_span,
        "database_bytes_per_span": disk_per_span / 2,
    }


def _result(products: dict[str, object], ratios: dict[str, object] | None = None) -> dict[str, object]:
    result: dict[str, object] = {
        "command": "python -m bench.compare",
        "started_at": "2026-01-01T00:00:00+00:00",
        "machine": {"cpu": "cpu", "cores": 2, "ram_gib": 8.0, "os": "Linux"},
        "versions": {"agentwatch": "0.1.0"},
        "workload": {
            "spans": 1000,
            "traces": 25,
            "batches": 1,
            "request_bytes": 2**20,
            "content_bytes": 2**19,
            "seed": 7,
        },
        "agentwatch_auth": "project API key",
        "notes": [],
        "products": products,
    }
    if ratios is not None:
        result["ratios"] = ratios
    return result


def test_targets_are_met_or_missed_by_their_own_direction() -> None:
    aw = _figures(e2e=100_000, query_s=0.001, disk_per_span=100, rss=200 * 2**20)
    px = _figures(e2e=100, query_s=0.1, disk_per_span=400, rss=1000 * 2**20)
    ratios = compare(aw, px)
    assert ratios["ingest_e2e"]["ratio"] == 1000 and ratios["ingest_e2e"]["met"] is True
    assert ratios["aggregate_queries"]["ratio"] == 100 and ratios["aggregate_queries"]["met"] is True
    assert ratios["disk_per_span"]["ratio"] == 4 and ratios["disk_per_span"]["met"] is False
    assert ratios["peak_rss"]["ratio"] == 0.2 and ratios["peak_rss"]["met"] is True
    markdown = render_markdown(_result({"agentwatch": aw, "phoenix": px}, ratios))
    assert "| disk bytes per span, Phoenix / agentwatch | 4x | >= 5 | MISSED |" in markdown
    assert "1,000x" in markdown


def test_without_phoenix_no_phoenix_figure_is_shown() -> None:
    aw = _figures(e2e=50_000, query_s=0.002, disk_per_span=90, rss=150 * 2**20)
    result = _result({"agentwatch": aw, "phoenix": {"measured": False, "reason": "not installed"}})
    table = render_table(result)
    assert table.count("not measured") == len(table.splitlines()) - 1
    assert "50,000" in table
    targets = [line for line in render_markdown(result).splitlines() if line.endswith("| not measured |")]
    assert len(targets) == len(TARGETS)


def test_profile_summary_counts_own_and_inclusive_samples(tmp_path: Path) -> None:
    raw = tmp_path / "profile.txt"
    raw.write_text(
        "main (app.py:1);insert (store.py:10) 3\nmain (app.py:1);decode (otlp.py:5) 1\nmain (app.py:2);insert (store.py:11) 1\n"
    )
    summary = summarize_profile(raw)
    assert summary["samples"] == 5
    assert summary["own"][0] == ("insert (store.py)", 0.8)
    assert summary["inclusive"][0] == ("main (app.py)", 1.0)


def test_memory_and_disk_are_measured_from_the_system(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "blob").write_bytes(os.urandom(64 * 1024))
    assert disk_bytes(tmp_path) >= 64 * 1024
    rss, anon = tree_memory_bytes(os.getpid())
    assert rss > anon > 10 * 2**20


def test_a_failing_question_is_recorded_not_fatal() -> None:
    def broken() -> object:
        raise BenchError("agentwatch GET /api/overview answered 500")

    failed = time_question(broken, repeats=3)
    assert failed["median_s"] is None and "answered 500" in str(failed["error"])
    timed = time_question(lambda: 42, repeats=5)
    assert timed["answer"] == 42 and 0 <= timed["median_s"] <= timed["p95_s"]


def test_the_memory_sampler_has_sampled_however_late_its_thread_runs() -> None:
    """``start`` and ``stop`` sample in the caller's thread: a starved sampling thread (a busy
    machine) still leaves the peaks of both ends, never zero."""
    sampler = RssSampler(os.getpid(), interval_s=3600.0)  # its thread never samples within the test
    sampler.start()
    assert sampler.peak_rss >= sampler.peak_anon > 0
    peak_rss, peak_anon = sampler.stop()
    assert peak_rss >= peak_anon > 0


def test_the_queryable_poll_adds_at_most_a_hundredth_of_the_measured_time() -> None:
    assert poll_interval(0.0) == 0.01
    assert poll_interval(2.2) == pytest.approx(0.022)
    assert poll_interval(3600.0) == 1.0


def test_first_calls_set_phoenix_against_the_overview_agentwatch_paid_for() -> None:
    """agentwatch's four aggregates come from one overview: the dearest first call is the one
    that paid for it, and every Phoenix first call is set against that one."""
    aw = _figures(e2e=20_000, query_s=0.02, disk_per_span=100, rss=2**28)
    px = _figures(e2e=100, query_s=0.01, disk_per_span=2000, rss=2**30)
    for q, first in zip(AGGREGATES, (0.1, 0.02, 0.02, 0.02), strict=True):
        aw["questions"][q]["first_s"] = first  # type: ignore[index]
    for q, first in zip(AGGREGATES, (0.5, 2.0, 1.5, 3.0), strict=True):
        px["questions"][q]["first_s"] = first  # type: ignore[index]
    ratios = compare(aw, px)
    assert ratios["first_call_aggregates"]["ratio"] == pytest.approx(5.0)
    assert ratios["first_call_aggregates"]["met"] is False
    assert ratios["first_call_aggregates"]["per_question"]["latency_p50_p95"] == pytest.approx(30.0)


def test_a_product_restarted_on_earlier_data_has_no_ingest_figures() -> None:
    aw = _figures(e2e=20_000, query_s=0.02, disk_per_span=100, rss=2**28)
    px = {**_figures(e2e=100, query_s=0.5, disk_per_span=2000, rss=2**30), "ingest": None, "reused_data": True}
    ratios = compare(aw, px)
    assert ratios["ingest_e2e"]["ratio"] is None and ratios["ingest_e2e"]["met"] is None
    assert ratios["peak_rss"]["met"] is None  # a restart's peak is no ingest's
    assert ratios["disk_per_span"]["ratio"] == 20
    rows = {row[0]: row for row in table_rows(_result({"agentwatch": aw, "phoenix": px}, ratios))}
    assert rows["end-to-end spans/s"][2] == "-"


def test_first_calls_by_size_take_each_size_from_its_best_result(tmp_path: Path) -> None:
    def write(name: str, spans: int, started: str, phoenix: bool) -> None:
        aw = _figures(e2e=20_000, query_s=0.02, disk_per_span=100, rss=2**28)
        for q in QUESTIONS:
            aw["questions"][q]["first_s"] = 0.05  # type: ignore[index]
        px = _figures(e2e=100, query_s=0.5, disk_per_span=2000, rss=2**30) if phoenix else {"measured": False}
        if phoenix:
            for q in QUESTIONS:
                px["questions"][q]["first_s"] = 1.0  # type: ignore[index]
        result = _result({"agentwatch": aw, "phoenix": px}, compare(aw, px) if phoenix else None)
        result["workload"]["spans"], result["started_at"] = spans, started  # type: ignore[index]
        (tmp_path / name).write_text(json.dumps(result))

    write("compare.json", 50_000, "2026-01-02", phoenix=True)
    write("compare_agentwatch_50000.json", 50_000, "2026-01-03", phoenix=False)
    write("compare_500000.json", 500_000, "2026-01-02", phoenix=True)
    write("compare_agentwatch_5000000.json", 5_000_000, "2026-01-02", phoenix=False)
    (tmp_path / "compare_old.json").write_text("{}")
    sizes = first_calls_by_size(tmp_path)
    assert [(r["spans"], r["file"]) for r in sizes] == [
        (50_000, "compare.json"),
        (500_000, "compare_500000.json"),
        (5_000_000, "compare_agentwatch_5000000.json"),
    ]
    assert sizes[0]["ratio"] == pytest.approx(20.0) and sizes[2]["phoenix_ms"] is None
    markdown = render_markdown(_result({"agentwatch": _figures(1, 1, 1, 1)}), sizes)
    assert "| 500,000 | 50 (after ingest) | 1,000 / 1,000 / 1,000 / 1,000 (after ingest) | 20x, 20x |" in markdown
