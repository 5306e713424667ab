"""Deleting a user's, a session's, a trace's, a range's or a project's data, and the retention
pass: spans, every rollup, texts, feedback, alerts and search hits go together, totals drop by
exactly what went, and the deleted texts' bytes leave the data directory (both back ends)."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from agentwatch.cli import main

from agentwatch_api.client import CollectorClient
from agentwatch_api.handshake import read_admin_token
from agentwatch_api.schemas import FeedbackIn
from agentwatch_platform.collector.query import cost as cost_query
from agentwatch_platform.collector.query import feedback as feedback_query
from agentwatch_platform.collector.query import overview as overview_query
from agentwatch_platform.collector.query import ranges
from agentwatch_platform.collector.query import runs as runs_query
from agentwatch_platform.collector.storage.base import Store
from agentwatch_platform.collector.storage.chdb_store import ChdbStore
from agentwatch_platform.collector.storage.deletion import (
    FAULT_ENV,
    DeletionError,
    Scope,
    delete_data,
    journal_for,
    replay,
)
from agentwatch_platform.collector.storage.maintenance import enforce_retention
from agentwatch_platform.collector.storage.model import SpanRow
from agentwatch_platform.collector.storage.run_closes import close_runs
from tests.collector.factories import agent_run
from tests.collector.ingest_helpers import REPO, otlp_request, serve, settings_for
from tests.support import local_http

P = "p1"
NOW = time.time()
DAY = 86_400


@pytest.fixture(autouse=True)
def _closed_path_for_few_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The overview reads closed minutes even for these few runs, so their rewrite is checked too."""
    monkeypatch.setattr(ranges, "MIN_CLOSED_RUN_ROWS", 0)


def _run(user: str, start_s: float, cost: float, marker: str, *, session: str = "") -> list[SpanRow]:
    """A run of ``user`` whose LLM calls carry the captured text ``marker``."""
    rows = agent_run(project=P, start_s=start_s, steps=2, cost_per_call=cost)
    return [
        replace(
            s,
            user_id=user,
            session_id=session or f"s-{user}",
            input_text=f"{marker} asks" if s.kind == "llm" else "",
            output_text=f"{marker} answer" if s.kind == "llm" else "",
        )
        for s in rows
    ]


def _marker(name: str) -> str:
    """A text that compression leaves as it is (a wide alphabet, no repeats): grep finds it stored."""
    return f"{name}-{secrets.token_urlsafe(24)}"


def _seed(store: Store) -> dict[str, list[list[SpanRow]]]:
    """Alice's and Bob's runs in the same hours (so shared rollup rows), feedback, alerts, closed runs."""
    runs: dict[str, list[list[SpanRow]]] = {"alice": [], "bob": []}
    for k in range(3):
        for user, cost in (("alice", 0.011), ("bob", 0.007)):
            run = _run(user, NOW - 3600 * k - 900 - (5 if user == "bob" else 0), cost * (k + 1), _marker(user))
            store.insert_spans(run)
            runs[user].append(run)
    refused = [
        replace(s, outcome="refused") if s.kind == "run" else s
        for s in _run("alice", NOW - 1200, 0.0, _marker("alice"))
    ]
    store.insert_spans(refused)  # a request refused before any work: counted apart (run_minutes.refused)
    runs["alice"].append(refused)
    for user in runs:
        feedback_query.add_feedback(
            store, P, runs[user][0][0].trace_id, FeedbackIn(score=1.0, comment=f"{user} liked it")
        )
        store.command(
            "INSERT INTO alerts (project, alert_id, scope, rule, state, message, started_at, updated_at) "
            "VALUES ({p:String}, {a:String}, map('user', {u:String}), 'user_cost', 'firing', {m:String}, now64(3), now64(3))",
            {"p": P, "a": f"alert-{user}", "u": user, "m": f"user {user} spends"},
        )
        store.command(
            "INSERT INTO alert_deliveries (project, alert_id, channel, attempt, ok, error, at) "
            "VALUES ({p:String}, {a:String}, 'webhook', 1, true, '', now64(3))",
            {"p": P, "a": f"alert-{user}"},
        )
    close_runs(store, margin_s=-1)
    return runs


def _cost(runs: list[list[SpanRow]]) -> float:
    return sum(s.cost_usd for run in runs for s in run if s.kind != "run")


def _totals(store: Store) -> dict[str, float]:
    window = {"start": NOW - 2 * DAY, "end": NOW + 60}
    over = overview_query.overview(store, P, **window)
    return {
        "overview_cost": over.figures["cost_usd"].value or 0.0,
        "overview_runs": over.figures["runs"].value or 0.0,
        "cost_total": cost_query.cost_breakdown(store, P, **window).total_usd or 0.0,
        "listed": runs_query.list_runs(store, P, **window).total,
        "minutes": _one(store, "SELECT sum(cost_usd) AS v FROM span_minutes WHERE project = {p:String}"),
        "hours": _one(store, "SELECT sum(cost_usd) AS v FROM span_hours WHERE project = {p:String}"),
        "run_minutes": _one(store, "SELECT sum(runs) AS v FROM run_minutes WHERE project = {p:String}"),
        "refused": _one(store, "SELECT sum(refused) AS v FROM run_minutes WHERE project = {p:String}"),
        "closed": _one(
            store, "SELECT sum(arraySum(runs)) AS v FROM closed_run_minutes FINAL WHERE project = {p:String}"
        ),
    }


def _one(store: Store, sql: str, **params: object) -> float:
    return float(store.query(sql, {"p": P, **params})[0]["v"] or 0)


def _found(store: Store, text: str) -> int:
    return runs_query.list_runs(store, P, start=NOW - 2 * DAY, end=NOW + 60, search=text).total


def _in_data_dir(directory: Path, text: str) -> bool:
    """Whether ``text``'s bytes are in any file under ``directory`` (grep -r)."""
    return subprocess.run(["grep", "-rqa", "--", text, str(directory)], check=False).returncode == 0


def _traces(runs: list[list[SpanRow]]) -> list[str]:
    return [run[0].trace_id for run in runs]


def _markers(runs: list[list[SpanRow]]) -> list[str]:
    return [next(s.input_text for s in run if s.input_text).removesuffix(" asks") for run in runs]


def _assert_alice_gone(store: Store, runs: dict[str, list[list[SpanRow]]], before: dict[str, float]) -> None:
    alice, bob = runs["alice"], runs["bob"]
    traces = _traces(alice)
    assert _one(store, "SELECT count() AS v FROM spans WHERE project = {p:String} AND user_id = 'alice'") == 0
    for table in ("spans", "runs_agg", "feedback"):
        assert _one(store, f"SELECT count() AS v FROM {table} WHERE trace_id IN {{t:Array(String)}}", t=traces) == 0
    assert _one(store, "SELECT count() AS v FROM alerts WHERE scope['user'] = 'alice'") == 0
    assert _one(store, "SELECT count() AS v FROM alert_deliveries WHERE alert_id = 'alert-alice'") == 0
    assert _one(store, "SELECT count() AS v FROM alerts WHERE scope['user'] = 'bob'") == 1
    after = _totals(store)
    dropped = _cost(alice)
    assert after["overview_cost"] == pytest.approx(before["overview_cost"] - dropped)
    assert after["cost_total"] == pytest.approx(before["cost_total"] - dropped)
    assert after["minutes"] == pytest.approx(_cost(bob)) and after["hours"] == pytest.approx(_cost(bob))
    assert (after["listed"], after["overview_runs"], after["run_minutes"], after["closed"], after["refused"]) == (
        3,
        3,
        3,
        3,
        0,
    )
    assert all(_found(store, marker) == 0 for marker in _markers(alice))
    assert all(_found(store, marker) == 1 for marker in _markers(bob))
    detail = runs_query.get_run(store, P, bob[0][0].trace_id)
    assert detail is not None and any(_markers(bob)[0] in s.input_text for s in detail.spans)
    assert runs_query.get_run(store, P, alice[0][0].trace_id) is None


def test_deleting_a_user_leaves_nothing_of_theirs_and_drops_the_totals_by_their_cost(
    store: Store,
    tmp_path: Path,
) -> None:
    runs = _seed(store)
    before = _totals(store)
    assert (before["listed"], before["run_minutes"], before["closed"], before["refused"]) == (6, 6, 6, 1)
    data_dir = Path(getattr(store, "path", tmp_path))
    if isinstance(store, ChdbStore):  # the texts are on disk as bytes grep finds, before
        assert all(_in_data_dir(data_dir, m) for m in _markers(runs["alice"]) + _markers(runs["bob"]))
    result = delete_data(store, Scope(P, "user", "alice"), actor="test", journal=journal_for(tmp_path))
    assert (result.traces, result.spans, result.cost_usd) == (
        4,
        sum(len(r) for r in runs["alice"]),
        pytest.approx(_cost(runs["alice"])),
    )
    _assert_alice_gone(store, runs, before)
    if isinstance(store, ChdbStore):
        assert result.texts_removed == 8
        assert not any(_in_data_dir(data_dir, m) for m in _markers(runs["alice"]))
        assert all(_in_data_dir(data_dir, m) for m in _markers(runs["bob"]))
    audit = store.query("SELECT actor, target, detail FROM audit_log WHERE action = 'data.delete'")
    assert [(a["actor"], a["target"]) for a in audit] == [("test", "user:alice")]
    assert json.loads(audit[0]["detail"])["spans"] == result.spans
    assert list(journal_for(tmp_path).directory.glob("*.json")) == []


def test_a_trace_a_session_and_a_range_each_take_whole_runs(store: Store, tmp_path: Path) -> None:
    runs = _seed(store)
    journal = journal_for(tmp_path)
    before = _totals(store)
    one = runs["bob"][0]
    delete_data(store, Scope(P, "trace", one[0].trace_id), actor="t", journal=journal)
    assert _totals(store)["cost_total"] == pytest.approx(before["cost_total"] - _cost([one]))
    delete_data(store, Scope(P, "session", "s-alice"), actor="t", journal=journal)
    after = _totals(store)
    assert after["listed"] == 2 and after["cost_total"] == pytest.approx(_cost(runs["bob"][1:]))
    oldest = runs["bob"][2]  # two hours back: the range takes it whole
    result = delete_data(store, Scope(P, "range", start=NOW - 3 * 3600, end=NOW - 2 * 3600), actor="t", journal=journal)
    assert result.traces == 1 and _totals(store)["cost_total"] == pytest.approx(_cost(runs["bob"][1:2]))
    assert _one(store, "SELECT count() AS v FROM spans WHERE trace_id = {t:String}", t=oldest[0].trace_id) == 0
    assert _totals(store)["minutes"] == pytest.approx(_cost(runs["bob"][1:2]))


def test_deleting_a_project_leaves_the_others(store: Store, tmp_path: Path) -> None:
    _seed(store)
    other = [replace(s, project="p2") for s in _run("carol", NOW - 600, 0.5, _marker("carol"))]
    store.insert_spans(other)
    result = delete_data(store, Scope(P, "project"), actor="t", journal=journal_for(tmp_path))
    assert result.spans == 7 * 7
    for table in ("spans", "runs_agg", "span_minutes", "span_hours", "run_minutes", "closed_run_minutes", "alerts"):
        assert _one(store, f"SELECT count() AS v FROM {table} WHERE project = {{p:String}}") == 0
    assert runs_query.list_runs(store, "p2", start=NOW - DAY, end=NOW + 60).total == 1


def test_a_deletion_names_exactly_one_thing() -> None:
    with pytest.raises(DeletionError):
        Scope(P, "user")
    with pytest.raises(DeletionError):
        Scope(P, "range", start=10.0, end=5.0)
    with pytest.raises(DeletionError):
        Scope("", "project")


# --- retention ------------------------------------------------------------------------------------
def _old_and_new(store: Store) -> tuple[list[SpanRow], list[SpanRow]]:
    old = _run("dora", NOW - 20 * DAY, 0.25, _marker("old"))
    new = _run("dora", NOW - 600, 0.05, _marker("new"))
    store.insert_spans(old)
    store.insert_spans(new)
    close_runs(store, margin_s=-1)
    return old, new


def _assert_only_new(store: Store, old: list[SpanRow], new: list[SpanRow]) -> None:
    window = {"start": NOW - 30 * DAY, "end": NOW + 60}
    page = runs_query.list_runs(store, P, **window)
    assert [r.trace_id for r in page.items] == [new[0].trace_id]
    assert overview_query.overview(store, P, **window).figures["cost_usd"].value == pytest.approx(_cost([new]))
    assert cost_query.cost_breakdown(store, P, **window).total_usd == pytest.approx(_cost([new]))
    old_marker = _markers([old])[0]
    assert runs_query.list_runs(store, P, **window, search=old_marker).total == 0
    assert runs_query.get_run(store, P, old[0].trace_id) is None
    for table, column in (
        ("runs_agg", "hour"),
        ("span_minutes", "minute"),
        ("span_hours", "hour"),
        ("run_minutes", "minute"),
    ):
        assert _one(store, f"SELECT count() AS v FROM {table} WHERE {column} < now() - INTERVAL 10 DAY") == 0


def test_lowering_the_retention_removes_old_runs_everywhere_in_one_pass(store: Store) -> None:
    old, new = _old_and_new(store)
    window = {"start": NOW - 30 * DAY, "end": NOW + 60}
    assert runs_query.list_runs(store, P, **window).total == 2
    assert "spans" in enforce_retention(store, 7)
    _assert_only_new(store, old, new)
    assert enforce_retention(store, 7) == []  # nothing left to remove


@pytest.mark.slow  # collector processes (make test runs it, make quick not)
def test_restarting_with_a_lower_retention_applies_it_at_once(tmp_path: Path) -> None:
    first = ChdbStore(tmp_path / "chdb", retention_days=30)
    first.migrate()
    old, new = _old_and_new(first)
    first.close()
    again = ChdbStore(tmp_path / "chdb", retention_days=7)
    again.migrate()
    try:
        _assert_only_new(again, old, new)
        assert not _in_data_dir(tmp_path, _markers([old])[0])
    finally:
        again.close()


# --- through the API and the CLI ------------------------------------------------------------------
@pytest.mark.slow  # collector processes (make test runs it, make quick not)
def test_the_admin_api_and_the_cli_delete_through_a_running_collector(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = settings_for(tmp_path / "data")
    with serve(settings) as running:
        handle = running.app.state.store
        runs = _seed(handle.get())
        told: list[str] = []
        running.app.state.deletion_listeners.append(told.append)  # as the alerts plugin registers itself
        token = read_admin_token(Path(settings.data_dir))
        with CollectorClient(running.url, token, timeout_s=120) as client:
            answer = client.delete_data(project=P, user_id="alice")
            assert answer["traces"] == 4 and answer["cost_usd"] == pytest.approx(_cost(runs["alice"]))
            with pytest.raises(Exception, match="exactly one"):
                client.delete_data(project=P, user_id="bob", session_id="s-bob")
        with pytest.raises(SystemExit, match="--yes"):
            main(["delete", "--project", P, "--user", "bob", "--data-dir", str(settings.data_dir)])
        assert main(["delete", "--project", P, "--user", "bob", "--yes", "--data-dir", str(settings.data_dir)]) == 0
        assert runs_query.list_runs(handle.get(), P, start=NOW - DAY, end=NOW + 60).total == 0
        audit = handle.get().query("SELECT target FROM audit_log WHERE action = 'data.delete' ORDER BY at")
    assert [a["target"] for a in audit] == ["user:alice", "user:bob"]
    assert told == [P, P]  # the API's and the CLI's deletion, both through this collector
    assert "Deleted user:bob of project 'p1': 3 runs" in capsys.readouterr().out


def _otlp_run(trace_id: bytes, user: str, prompt: str) -> bytes:
    attrs = {"user.id": user, "session.id": f"s-{user}"}
    spans = [
        {"span_id": os.urandom(8), "name": "invoke_agent research", "attrs": attrs | {"agentwatch.span.kind": "run"}},
        {
            "span_id": os.urandom(8),
            "name": "chat sim-small",
            "attrs": attrs
            | {
                "agentwatch.span.kind": "llm",
                "gen_ai.request.model": "sim-small",
                "input.value": prompt,
                "output.value": "ok",
            },
        },
    ]
    spans[1]["parent"] = spans[0]["span_id"]
    return otlp_request(trace_id, spans).SerializeToString()


def test_a_user_deleted_through_a_collector_leaves_no_byte_of_their_prompts_in_the_data_directory(
    tmp_path: Path,
) -> None:
    """Over OTLP/HTTP: the prompts reach the spool and the text files; after the deletion neither holds them."""
    settings = settings_for(tmp_path / "data")
    data_dir = Path(settings.data_dir)
    prompts = {"alice": _marker("alice"), "bob": _marker("bob")}
    with serve(settings) as running:
        key = running.key(P, ["ingest", "read"])
        traces = {user: os.urandom(16) for user in prompts}
        for user, prompt in prompts.items():
            body = _otlp_run(traces[user], user, prompt)
            answer = local_http.post(
                running.url + "/v1/traces",
                content=body,
                headers={"Content-Type": "application/x-protobuf", "Authorization": f"Bearer {key}"},
                timeout=30,
            )
            assert answer.status_code == 200, answer.text
        _wait_stored(running.app.state.store, [t.hex() for t in traces.values()])
        assert all(_in_data_dir(data_dir, prompt) for prompt in prompts.values())
        with CollectorClient(running.url, read_admin_token(data_dir), timeout_s=120) as client:
            assert client.delete_data(project=P, user_id="alice")["traces"] == 1
        assert not _in_data_dir(data_dir, prompts["alice"])  # neither the text files nor the spool
        assert _in_data_dir(data_dir, prompts["bob"])
        bob = local_http.get(
            f"{running.url}/api/runs/{traces['bob'].hex()}", headers={"Authorization": f"Bearer {key}"}
        )
        assert any(s["input_text"] == prompts["bob"] for s in bob.json()["spans"])
        gone = local_http.get(
            f"{running.url}/api/runs/{traces['alice'].hex()}", headers={"Authorization": f"Bearer {key}"}
        )
        assert gone.status_code == 404


def _wait_stored(store: Store, trace_ids: list[str]) -> None:
    """Until the writer has stored both spans of each trace (bounded)."""
    deadline = time.monotonic() + 60
    sql = "SELECT count() AS v FROM spans WHERE trace_id IN {t:Array(String)}"
    while _one(store, sql, t=trace_ids) < 2 * len(trace_ids):
        assert time.monotonic() < deadline, "the spans were not stored within 60 s"
        time.sleep(0.05)


def test_spans_of_deleted_data_still_on_their_way_are_not_stored(store: Store, tmp_path: Path) -> None:
    runs = _seed(store)
    delete_data(store, Scope(P, "user", "alice"), actor="t", journal=journal_for(tmp_path))
    late = _run("alice", NOW - 300, 0.5, _marker("alice"))  # queued before the deletion, inserted after
    straggler = [replace(s, span_id=s.span_id + "ff") for s in runs["alice"][0][:2]]  # a late span of a deleted run
    assert store.insert_spans(late + straggler) == 0
    after = _run("alice", time.time() + 5, 0.5, _marker("alice"))  # a run that starts after the deletion is new data
    assert store.insert_spans(after) == len(after)


# --- crash safety ---------------------------------------------------------------------------------
_DELETE_AND_DIE = """
import sys
from pathlib import Path
from agentwatch_platform.collector.storage.chdb_store import ChdbStore
from agentwatch_platform.collector.storage.deletion import Scope, delete_data, journal_for
store = ChdbStore(Path(sys.argv[1]) / "chdb")
store.migrate()
delete_data(store, Scope("p1", "user", "alice"), actor="test", journal=journal_for(sys.argv[1]))
print("finished")
"""


@pytest.mark.slow  # five collector restarts, ~40 s each under load 13; make quick leaves it out, make test runs it
@pytest.mark.parametrize("point", ["planned", "rows_deleted", "rollups_rebuilt", "texts_written", "texts_removed"])
def test_a_deletion_killed_half_way_is_finished_at_the_next_start(tmp_path: Path, point: str) -> None:
    store = ChdbStore(tmp_path / "chdb")
    store.migrate()
    runs = _seed(store)
    before = _totals(store)
    store.close()
    killed = subprocess.run(
        [sys.executable, "-c", _DELETE_AND_DIE, str(tmp_path)],
        env={**_env(), FAULT_ENV: point},
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert killed.returncode == -9, killed.stderr[-2000:]
    again = ChdbStore(tmp_path / "chdb")
    again.migrate()
    try:
        assert [r.target for r in replay(again, journal_for(tmp_path))] == ["user:alice"]  # as a collector's start does
        _assert_alice_gone(again, runs, before)
        assert not any(_in_data_dir(tmp_path, m) for m in _markers(runs["alice"]))
        assert all(_in_data_dir(tmp_path, m) for m in _markers(runs["bob"]))
        assert len(again.query("SELECT 1 FROM audit_log WHERE action = 'data.delete'")) == 1
        assert list(tmp_path.rglob("*.tmp")) == []
    finally:
        again.close()


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != FAULT_ENV}
