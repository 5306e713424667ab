"""Phoenix's database filled by copying the rows it wrote for a pool, once per further pass."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from bench.compare_phoenix_fill import main

_SCHEMA = """
CREATE TABLE project_sessions (id INTEGER PRIMARY KEY);
CREATE TABLE span_annotations (id INTEGER PRIMARY KEY);
CREATE TABLE trace_annotations (id INTEGER PRIMARY KEY);
CREATE TABLE document_annotations (id INTEGER PRIMARY KEY);
CREATE TABLE traces (id INTEGER PRIMARY KEY, project_rowid INTEGER NOT NULL, trace_id VARCHAR NOT NULL UNIQUE,
    start_time TIMESTAMP NOT NULL, end_time TIMESTAMP NOT NULL, project_session_rowid INTEGER);
CREATE TABLE spans (id INTEGER PRIMARY KEY, trace_rowid INTEGER NOT NULL, span_id VARCHAR NOT NULL UNIQUE,
    parent_id VARCHAR, name VARCHAR NOT NULL, span_kind VARCHAR NOT NULL, start_time TIMESTAMP NOT NULL,
    end_time TIMESTAMP NOT NULL, attributes JSONB NOT NULL, events JSONB NOT NULL, status_code VARCHAR NOT NULL,
    status_message VARCHAR NOT NULL, cumulative_error_count INTEGER NOT NULL,
    cumulative_llm_token_count_prompt INTEGER NOT NULL, cumulative_llm_token_count_completion INTEGER NOT NULL,
    llm_token_count_prompt INTEGER, llm_token_count_completion INTEGER);
CREATE TABLE span_costs (id INTEGER PRIMARY KEY, span_rowid INTEGER NOT NULL, trace_rowid INTEGER NOT NULL,
    model_id INTEGER, span_start_time TIMESTAMP NOT NULL, total_cost FLOAT, total_tokens FLOAT, prompt_cost FLOAT,
    prompt_tokens FLOAT, completion_cost FLOAT, completion_tokens FLOAT);
CREATE TABLE span_cost_details (id INTEGER PRIMARY KEY, span_cost_id INTEGER NOT NULL, token_type VARCHAR NOT NULL,
    is_prompt BOOLEAN NOT NULL, cost FLOAT, tokens FLOAT, cost_per_token FLOAT,
    UNIQUE (span_cost_id, token_type, is_prompt));
"""
_TRACE = "a6e1b0c4d2f3" + "0" * 8 + "0123456789ab"


def _pool(root: Path) -> Path:
    """A pool of one trace: a root span and an LLM child with its cost (two detail rows)."""
    (root / "phoenix-data").mkdir(parents=True)
    db = sqlite3.connect(root / "phoenix-data" / "phoenix.db")
    db.executescript(_SCHEMA)
    db.execute("INSERT INTO traces VALUES (1, 2, ?, 't0', 't9', NULL)", (_TRACE,))
    span = "INSERT INTO spans VALUES (?, 1, ?, ?, ?, ?, 't0', 't9', '{}', '[]', ?, '', ?, ?, ?, ?, ?)"
    db.execute(span, (1, "00000000000000aa", None, "run", "AGENT", "OK", 1, 30, 20, None, None))
    db.execute(span, (2, "00000000000000bb", "00000000000000aa", "llm", "LLM", "ERROR", 1, 30, 20, 30, 20))
    db.execute("INSERT INTO span_costs VALUES (1, 2, 1, NULL, 't0', 0.5, 50, 0.3, 30, 0.2, 20)")
    db.execute("INSERT INTO span_cost_details VALUES (1, 1, 'input', 1, 0.3, 30, 0.01)")
    db.execute("INSERT INTO span_cost_details VALUES (2, 1, 'output', 0, 0.2, 20, 0.01)")
    db.commit()
    db.close()
    (root / "workload.json").write_text(json.dumps({"spans": 2, "unique_spans": 2, "seed": 7, "end_time_ns": 1}))
    return root


def test_each_pass_copies_the_pools_rows_with_the_workloads_trace_ids(tmp_path: Path) -> None:
    pool = _pool(tmp_path / "pool")
    assert main(["--pool", str(pool), "--into", str(tmp_path / "big"), "--spans", "6"]) == 0
    db = sqlite3.connect(tmp_path / "big" / "phoenix-data" / "phoenix.db")
    traces = [row[0] for row in db.execute("SELECT trace_id FROM traces ORDER BY id")]
    assert traces == [_TRACE[:12] + f"{n:08x}" + _TRACE[20:] for n in range(3)]
    children = db.execute(
        "SELECT t.trace_id, c.span_id, p.name, c.status_code, c.llm_token_count_prompt FROM spans c "
        "JOIN spans p ON p.span_id = c.parent_id JOIN traces t ON t.id = c.trace_rowid AND t.id = p.trace_rowid"
    ).fetchall()
    assert [(trace[12:20], span, rest) for trace, span, *rest in children] == [
        (f"{n:08x}", prefix + "0000000000bb", ["run", "ERROR", 30]) for n, prefix in enumerate(("0000", "0001", "0002"))
    ]
    costs = db.execute(
        "SELECT s.span_id, c.trace_rowid = s.trace_rowid, sum(d.tokens) FROM span_costs c "
        "JOIN spans s ON s.id = c.span_rowid JOIN span_cost_details d ON d.span_cost_id = c.id GROUP BY c.id"
    ).fetchall()
    assert costs == [(f"{n:04x}0000000000bb", 1, 50.0) for n in range(3)]  # 0000 is the pool's: skipped
    kept = json.loads((tmp_path / "big" / "workload.json").read_text())
    assert kept["spans"] == 6 and kept["unique_spans"] == 2 and "copied in SQL 2 more times" in kept["phoenix_fill"]


def test_a_pool_with_rows_the_copy_would_not_reproduce_is_refused(tmp_path: Path) -> None:
    pool = _pool(tmp_path / "pool")
    db = sqlite3.connect(pool / "phoenix-data" / "phoenix.db")
    db.execute("INSERT INTO span_annotations VALUES (1)")
    db.commit()
    db.close()
    with pytest.raises(SystemExit, match="span_annotations"):
        main(["--pool", str(pool), "--into", str(tmp_path / "big"), "--spans", "4"])
    with pytest.raises(SystemExit, match="multiple"):
        main(["--pool", str(pool), "--into", str(tmp_path / "other"), "--spans", "5"])
