"""Captured texts of an embedded store in files of their own (``collector.storage.texts``): written
at decode or insert, read back for a run's spans, searched, expired, and what a torn frame or a
refused write does. The OTLP requests are real; the store is real chDB."""

from __future__ import annotations

import os
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest

from agentwatch_platform.collector.storage.chdb_store import ChdbStore
from agentwatch_platform.collector.storage.columns import spans_table
from agentwatch_platform.collector.storage.sql.runs import SPANS_OF_TRACE
from agentwatch_platform.collector.storage.texts import DAY_NS, REMOVED_REF, TEXT_REF, TextStore, TextStoreError
from tests.collector.factories import new_trace_id
from tests.collector.ingest_helpers import otlp_request, run_spans, serve, settings_for
from tests.collector.test_store import full_row
from tests.support import local_http
from tests.support.poll import wait_until

NOW_NS = time.time_ns()
PROTOBUF = {"Content-Type": "application/x-protobuf"}


def _rows(n: int, *, trace_id: str | None = None, start_ns: int = NOW_NS - 3_600 * 10**9, text: str = "prompt"):
    trace = trace_id or new_trace_id()
    base = replace(full_row(), trace_id=trace, start_time_ns=start_ns, end_time_ns=start_ns + 10**9)
    return [
        replace(base, span_id=f"{i:016x}", input_text=f"{text} {i} ünïcode", output_text=f"answer {i}" if i % 2 else "")
        for i in range(n)
    ]


def _read(texts: TextStore, table: pa.Table) -> list[dict]:
    rows = table.select(["project", "trace_id", "span_id", TEXT_REF]).to_pylist()
    texts.fill(rows)
    return rows


def test_stash_empties_the_text_columns_and_fill_brings_every_text_back(tmp_path: Path) -> None:
    texts = TextStore(tmp_path / "texts")
    rows = _rows(50) + [replace(_rows(1)[0], span_id="ffff000000000000", input_text="", output_text="")]
    stashed = texts.stash(spans_table(rows))
    assert stashed.column("input_text").to_pylist() == [""] * 51
    assert stashed.column("output_text").to_pylist() == [""] * 51
    refs = stashed.column(TEXT_REF).to_pylist()
    assert all(refs[:50]) and refs[50] == 0  # a span with no text points nowhere
    got = _read(texts, stashed)
    assert [(g["input_text"], g["output_text"]) for g in got[:50]] == [(r.input_text, r.output_text) for r in rows[:50]]
    assert "input_text" not in got[50] and TEXT_REF not in got[50]
    again = texts.stash(stashed)  # rows already written are not written twice
    assert again.column(TEXT_REF).to_pylist() == refs
    assert texts.size_bytes() == sum(p.stat().st_size for p in (tmp_path / "texts").iterdir())


def test_spans_of_different_days_go_to_their_days_files(tmp_path: Path) -> None:
    texts = TextStore(tmp_path / "texts", retention_days=0)
    today, old = _rows(3, start_ns=NOW_NS), _rows(3, start_ns=NOW_NS - 3 * DAY_NS, text="older")
    stashed = texts.stash(spans_table(today + old))
    assert len(list((tmp_path / "texts").glob("*.awt"))) == 2
    got = _read(texts, stashed)
    assert [g["input_text"] for g in got] == [r.input_text for r in today + old]


def test_search_is_case_insensitive_per_project_and_per_day(tmp_path: Path) -> None:
    texts = TextStore(tmp_path / "texts", retention_days=0)
    hit, other, old = new_trace_id(), new_trace_id(), new_trace_id()
    texts.stash(spans_table(_rows(3, trace_id=hit, text="The Capital of FRANCE")))
    texts.stash(spans_table([replace(r, project="p2") for r in _rows(3, trace_id=other, text="capital of france")]))
    texts.stash(spans_table(_rows(2, trace_id=old, start_ns=NOW_NS - 5 * DAY_NS, text="capital of france")))
    day_start = NOW_NS - DAY_NS
    assert texts.search("p1", day_start, NOW_NS + DAY_NS, "CAPITAL of france").trace_ids == [hit]
    assert texts.search("p1", NOW_NS - 6 * DAY_NS, NOW_NS + DAY_NS, "capital").trace_ids == [hit, old]  # newest first
    assert texts.search("p1", day_start, NOW_NS + DAY_NS, "ÜNÏCODE").trace_ids == [hit]  # Unicode case folding
    assert texts.search("p1", day_start, NOW_NS + DAY_NS, "no such words").trace_ids == []
    assert texts.search("p1", day_start, NOW_NS + DAY_NS, ".*").trace_ids == []  # a literal, not a pattern


def test_a_torn_frame_is_skipped_by_search_and_the_frames_after_it_still_read(tmp_path: Path) -> None:
    """A crash in the middle of a write leaves a partial frame; the next writes follow it."""
    texts = TextStore(tmp_path / "texts")
    first = texts.stash(spans_table(_rows(5, text="before the crash")))
    (path,) = (tmp_path / "texts").glob("*.awt")
    whole = path.read_bytes()
    with open(path, "ab") as file:  # a frame header and half its payload, as a SIGKILL can leave it
        file.write(whole[len(b"AWTEXTS1\n") : len(b"AWTEXTS1\n") + 40])
    texts.close()
    texts = TextStore(tmp_path / "texts")
    after = texts.stash(spans_table(_rows(5, text="after the crash")))
    assert [g["input_text"] for g in _read(texts, after)] == [f"after the crash {i} ünïcode" for i in range(5)]
    assert [g["input_text"] for g in _read(texts, first)] == [f"before the crash {i} ünïcode" for i in range(5)]
    window = (NOW_NS - DAY_NS, NOW_NS + DAY_NS)
    assert len(texts.search("p1", *window, "after the crash").trace_ids) == 1
    assert len(texts.search("p1", *window, "before the crash").trace_ids) == 1


def test_a_damaged_frame_leaves_its_spans_without_text_and_the_rest_readable(tmp_path: Path) -> None:
    texts = TextStore(tmp_path / "texts")
    damaged = texts.stash(spans_table(_rows(3, text="damaged")))
    fine = texts.stash(spans_table(_rows(3, text="fine")))
    (path,) = (tmp_path / "texts").glob("*.awt")
    offset = damaged.column(TEXT_REF)[0].as_py() & ((1 << 40) - 1)
    with open(path, "r+b") as file:
        file.seek(offset + 20)
        file.write(b"\xff\xff\xff\xff")
    rows = _read(texts, pa.concat_tables([damaged, fine]))
    assert [(r["input_text"], r["text_state"]) for r in rows[:3]] == [("", "damaged")] * 3  # shown so, no error
    assert [r["input_text"] for r in rows[3:]] == [f"fine {i} ünïcode" for i in range(3)]
    assert texts.search("p1", NOW_NS - DAY_NS, NOW_NS + DAY_NS, "ünïcode").trace_ids == [
        fine.column("trace_id")[0].as_py()
    ]


def test_expire_deletes_the_days_past_the_retention_and_keeps_the_rest(tmp_path: Path) -> None:
    texts = TextStore(tmp_path / "texts", retention_days=7)
    for days_ago in (0, 6, 8, 30):
        texts.stash(spans_table(_rows(1, start_ns=NOW_NS - days_ago * DAY_NS)))
    gone = texts.expire(NOW_NS)
    assert len(gone) == 2 and len(list((tmp_path / "texts").glob("*.awt"))) == 2
    stashed = texts.stash(spans_table(_rows(1, start_ns=NOW_NS - 8 * DAY_NS)))  # a late span of an expired day
    assert _read(texts, stashed)[0]["input_text"] == "prompt 0 ünïcode"
    assert TextStore(tmp_path / "kept", retention_days=0).expire(NOW_NS + 1000 * DAY_NS) == []


def test_the_embedded_store_keeps_texts_out_of_its_spans_table(tmp_path: Path) -> None:
    store = ChdbStore(tmp_path / "chdb", result_cache_s=0)
    try:
        store.migrate()
        rows = _rows(20)
        assert store.insert_spans(rows) == 20
        params = {"project": "p1", "trace_id": rows[0].trace_id, "limit": 100}
        stored = store.query(SPANS_OF_TRACE, params)
        assert {(s["input_text"], s["output_text"]) for s in stored} == {("", "")}
        assert all(s[TEXT_REF] for s in stored)
        store.read_texts(stored, project="p1", trace_id=rows[0].trace_id)
        assert sorted((s["input_text"], s["output_text"]) for s in stored) == sorted(
            (r.input_text, r.output_text) for r in rows
        )
        assert TEXT_REF not in stored[0]
        assert store.insert_spans(rows) == 0  # a duplicate writes nothing, text included
        assert len(store.texts.search("p1", NOW_NS - DAY_NS, NOW_NS + DAY_NS, "prompt").trace_ids) == 1
    finally:
        store.close()


def test_texts_go_into_the_spans_table_when_their_files_refuse_and_still_read(tmp_path: Path) -> None:
    """Nothing acknowledged is lost to a text write that fails (here: the directory became a file)."""
    store = ChdbStore(tmp_path / "chdb", result_cache_s=0)
    try:
        store.migrate()
        store.texts.close()
        for path in (tmp_path / "chdb" / "texts").iterdir():
            path.unlink()
        (tmp_path / "chdb" / "texts").rmdir()
        (tmp_path / "chdb" / "texts").write_text("not a directory")
        rows = _rows(4, text="kept in the table")
        assert store.insert_spans(rows) == 4
        store.close()
        store = ChdbStore(tmp_path / "chdb", result_cache_s=0)  # and a restart opens the store all the same
        stored = store.query(SPANS_OF_TRACE, {"project": "p1", "trace_id": rows[0].trace_id, "limit": 10})
        assert all(s[TEXT_REF] == 0 for s in stored)
        store.read_texts(stored, project="p1", trace_id=rows[0].trace_id)
        assert sorted(s["input_text"] for s in stored) == sorted(r.input_text for r in rows)
    finally:
        store.close()


def _llm_request(trace_id: bytes, prompt: str, answer: str, *, pad: int = 0) -> bytes:
    root = {"agentwatch.span.kind": "run"} | ({"pad": "p" * pad} if pad else {})
    spans = [
        {"span_id": os.urandom(8), "name": "invoke_agent research", "attrs": root},
        {
            "span_id": os.urandom(8),
            "name": "chat sim-small",
            "attrs": {
                "agentwatch.span.kind": "llm",
                "gen_ai.request.model": "sim-small",
                "input.value": prompt,
                "output.value": answer,
            },
        },
    ]
    spans[1]["parent"] = spans[0]["span_id"]
    return otlp_request(trace_id, spans).SerializeToString()


@pytest.mark.parametrize("size", ["inline", "threaded"])
def test_a_collector_writes_texts_at_decode_shows_them_in_the_run_and_finds_the_run_by_them(
    tmp_path: Path, size: str
) -> None:
    """Through OTLP/HTTP: the texts never reach chDB, the run detail shows them, search finds them.
    ``threaded``: a body over 32 KiB, decoded in the pool rather than on the event loop."""
    pad = 40_000 if size == "threaded" else 0
    with serve(settings_for(tmp_path / "data")) as collector:
        key = collector.key("texts")
        headers = {**PROTOBUF, "Authorization": f"Bearer {key}"}
        trace_id, other = os.urandom(16), os.urandom(16)
        prompt = "Which river flows through Zürich?"
        first = _llm_request(trace_id, prompt, "The Limmat.", pad=pad)
        assert (len(first) > 32 * 1024) == (size == "threaded")  # collector.ingest.pipeline._INLINE_BYTES
        for body in (first, _llm_request(other, "hi", "hello")):
            response = local_http.post(collector.url + "/v1/traces", content=body, headers=headers, timeout=30)
            assert response.status_code == 200, response.text
        auth = {"Authorization": f"Bearer {key}"}
        wait_until(
            lambda: len(run_spans(collector.url, key, trace_id.hex(), expect=2, timeout=0.1)) == 2,
            60,
            "the run's two spans were not stored",
        )
        run = local_http.get(f"{collector.url}/api/runs/{trace_id.hex()}", headers=auth, timeout=30)
        llm = next(s for s in run.json()["spans"] if s["kind"] == "llm")
        assert (llm["input_text"], llm["output_text"]) == (prompt, "The Limmat.")
        store = collector.app.state.store
        in_table = store.query(
            "SELECT input_text, output_text, text_ref FROM spans WHERE trace_id = {t:String} ORDER BY text_ref",
            {"t": trace_id.hex()},
        )
        assert [(r["input_text"], r["output_text"], r["text_ref"] > 0) for r in in_table] == [
            ("", "", False),  # the run span captured nothing
            ("", "", True),
        ]
        found = local_http.get(
            collector.url + "/api/runs",
            params={"search": "ZÜRICH", "start": time.time() - 3600},
            headers=auth,
            timeout=30,
        ).json()
        assert [r["trace_id"] for r in found["items"]] == [trace_id.hex()]
        assert list((tmp_path / "data" / "chdb" / "texts").glob("*.awt"))


def test_a_batch_of_requests_with_and_without_text_refs_is_stored_with_every_text(tmp_path: Path) -> None:
    """Requests decoded while the store was not open yet carry their texts and no ``text_ref``;
    concatenated with the rest (nulls, or the writer's 0), the insert writes their texts then."""
    store = ChdbStore(tmp_path / "chdb", result_cache_s=0)
    try:
        store.migrate()
        early, late = _rows(3, text="decoded before the store opened"), _rows(3, text="decoded after")
        batch = pa.concat_tables([spans_table(early), store.texts.stash(spans_table(late))], promote_options="default")
        assert batch.column(TEXT_REF).null_count == 3
        assert store.insert_spans(batch) == 6
        for rows in (early, late):
            stored = store.query(SPANS_OF_TRACE, {"project": "p1", "trace_id": rows[0].trace_id, "limit": 10})
            assert all(s[TEXT_REF] for s in stored)
            store.read_texts(stored, project="p1", trace_id=rows[0].trace_id)
            assert sorted(s["input_text"] for s in stored) == sorted(r.input_text for r in rows)
    finally:
        store.close()


def _reusing(trace_id: str, text: str, n: int = 5) -> list:
    """Spans ``0000000000000001``.. of ``trace_id``: ids that a counter-based tracer reuses in every trace."""
    return [replace(r, span_id=f"{i + 1:016x}") for i, r in enumerate(_rows(n, trace_id=trace_id, text=text))]


def test_traces_reusing_span_ids_in_one_frame_each_read_their_own_texts(tmp_path: Path) -> None:
    texts = TextStore(tmp_path / "texts")
    a, b = new_trace_id(), new_trace_id()
    stashed = texts.stash(spans_table(_reusing(a, "of A") + _reusing(b, "of B")))
    assert len(set(stashed.column(TEXT_REF).to_pylist())) == 1  # one frame holds both traces
    got = _read(texts, stashed)
    assert [g["input_text"] for g in got] == [f"of {t} {i} ünïcode" for t in "AB" for i in range(5)]
    assert {g["text_state"] for g in got} == {"captured"}
    other_project = [
        dict(g, project="p2", text_ref=r) for g, r in zip(got, stashed.column(TEXT_REF).to_pylist(), strict=True)
    ]
    texts.fill(other_project)  # the same trace and span ids in another project: not theirs
    assert {(g["input_text"], g["text_state"]) for g in other_project} == {("", "damaged")}


def test_a_file_truncated_at_a_frame_boundary_and_appended_to_never_gives_another_traces_text(tmp_path: Path) -> None:
    texts = TextStore(tmp_path / "texts")
    a, b = new_trace_id(), new_trace_id()
    first = texts.stash(spans_table(_reusing(a, "of A")))
    (path,) = (tmp_path / "texts").glob("*.awt")
    offset = first.column(TEXT_REF)[0].as_py() & ((1 << 40) - 1)
    os.truncate(path, offset)  # A's frame gone; the next frame starts where it was
    second = texts.stash(spans_table(_reusing(b, "of B")))
    assert second.column(TEXT_REF).to_pylist() == first.column(TEXT_REF).to_pylist()  # the very same refs
    assert {(g["input_text"], g["text_state"]) for g in _read(texts, first)} == {("", "damaged")}
    assert [g["input_text"] for g in _read(texts, second)] == [f"of B {i} ünïcode" for i in range(5)]


def test_rows_without_their_trace_id_are_matched_on_the_one_given(tmp_path: Path) -> None:
    """``sql.runs.SPANS_OF_TRACE`` selects neither project nor trace id: the caller names them."""
    texts = TextStore(tmp_path / "texts")
    a, b = new_trace_id(), new_trace_id()
    stashed = texts.stash(spans_table(_reusing(a, "of A") + _reusing(b, "of B")))
    rows = stashed.select(["span_id", TEXT_REF]).to_pylist()[5:]
    texts.fill(rows, project="p1", trace_id=b)
    assert [r["input_text"] for r in rows] == [f"of B {i} ünïcode" for i in range(5)]
    unnamed = stashed.select(["span_id", TEXT_REF]).to_pylist()
    texts.fill(unnamed)  # no key at all: nothing can be vouched for
    assert {r["text_state"] for r in unnamed} == {"damaged"}


def test_text_states_tell_not_captured_removed_and_damaged_apart(tmp_path: Path) -> None:
    texts = TextStore(tmp_path / "texts", retention_days=7)
    rows = [
        {"span_id": "1", "input_text": "", "output_text": "", TEXT_REF: 0},
        {"span_id": "2", "input_text": "in the row", "output_text": "", TEXT_REF: 0},
        {"span_id": "3", "input_text": "", "output_text": "", TEXT_REF: REMOVED_REF},
        {"span_id": "4", "input_text": "", "output_text": "", TEXT_REF: ((NOW_NS - 30 * DAY_NS) // DAY_NS) << 40 | 9},
        {"span_id": "5", "input_text": "", "output_text": "", TEXT_REF: (NOW_NS // DAY_NS) << 40 | 9},
    ]
    texts.fill(rows, project="p1", trace_id=new_trace_id())
    assert [r["text_state"] for r in rows] == ["not_captured", "captured", "removed", "removed", "damaged"]
    assert all(TEXT_REF not in r for r in rows)


def test_a_day_file_removed_or_replaced_under_the_store_is_reopened_and_counted(tmp_path: Path) -> None:
    texts = TextStore(tmp_path / "texts")
    before = texts.stash(spans_table(_rows(2, text="before")))
    (path,) = (tmp_path / "texts").glob("*.awt")
    path.unlink()
    removed = texts.stash(spans_table(_rows(2, text="after removal")))
    copy = path.read_bytes()
    path.with_suffix(".tmp").write_bytes(copy)
    os.replace(path.with_suffix(".tmp"), path)  # a restore: same bytes, another inode
    replaced = texts.stash(spans_table(_rows(2, text="after replacement")))
    assert texts.reopened == 2 and texts.write_failures == 0
    assert {g["text_state"] for g in _read(texts, before)} == {"damaged"}
    for stashed, text in ((removed, "after removal"), (replaced, "after replacement")):
        assert [g["input_text"] for g in _read(texts, stashed)] == [f"{text} {i} ünïcode" for i in range(2)]


def test_a_refused_write_is_counted(tmp_path: Path) -> None:
    texts = TextStore(tmp_path / "texts")
    (tmp_path / "texts").rmdir()
    (tmp_path / "texts").write_text("not a directory")
    with pytest.raises(TextStoreError):
        texts.stash(spans_table(_rows(3)))
    assert texts.write_failures == 3


def test_search_names_the_files_it_could_not_read_and_still_answers(tmp_path: Path) -> None:
    texts = TextStore(tmp_path / "texts")
    hit = texts.stash(spans_table(_rows(2, text="needle")))
    texts.stash(spans_table(_rows(2, text="needle")))
    (path,) = (tmp_path / "texts").glob("*.awt")
    offset = hit.column(TEXT_REF)[0].as_py() & ((1 << 40) - 1)
    with open(path, "r+b") as file:
        file.seek(offset + 30)
        file.write(b"\x00\x01\x02\x03")
    tomorrow = tmp_path / "texts" / f"{datetime.fromtimestamp(NOW_NS / 1e9 + 86_400, UTC):%Y-%m-%d}.awt"
    tomorrow.mkdir()  # a directory named after tomorrow's day file
    found = texts.search("p1", NOW_NS - DAY_NS, NOW_NS + 2 * DAY_NS, "needle")
    assert len(found.trace_ids) == 1  # the intact frame's trace
    assert len(found.unreadable) == 2
    assert any(tomorrow.name in line and "cannot be read" in line for line in found.unreadable)
    assert any(path.name in line and "damaged" in line for line in found.unreadable)
