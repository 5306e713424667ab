"""Captured texts sealed into compressed blocks (``collector.storage.text_blocks``): every text reads
back under its span after a seal, search and its index see the blocks, a crash between writing a
block and cutting the write-ahead file loses and duplicates nothing, and a deletion takes the
texts out of the blocks' bytes."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pytest
from prometheus_client import generate_latest

from agentwatch_platform.collector.metrics import Metrics
from agentwatch_platform.collector.storage import text_blocks
from agentwatch_platform.collector.storage.columns import spans_table
from agentwatch_platform.collector.storage.texts import _HELD_BLOCKS, DAY_NS, FAULT_ENV, TEXT_REF, TextStore
from tests.collector.factories import new_trace_id
from tests.collector.ingest_helpers import REPO
from tests.collector.test_store import full_row
from tests.support.poll import wait_until

NOW_NS = 1_780_000_000 * 10**9  # a fixed day: the texts of every test here are that day's
WINDOW = (NOW_NS - DAY_NS, NOW_NS + DAY_NS)
SEAL_BYTES = 64 << 10  # small blocks: a few requests each


def _request(label: str, spans: int = 20) -> pa.Table:
    """One request's spans of a trace: an agent's prompts, which repeat across spans (a shared
    instruction and the growing context), and no text on every third span (a tool's)."""
    base = replace(full_row(), trace_id=new_trace_id(), start_time_ns=NOW_NS, end_time_ns=NOW_NS + 10**9)
    instruction = "You are a careful research agent. Cite every source you use. " * 4
    rows = [
        replace(
            base,
            span_id=f"{i:016x}",
            input_text="" if i % 3 == 2 else f"{instruction} {label} step {i}: find the filings of {label}",
            output_text="" if i % 3 == 2 else f"{label} answer {i}",
        )
        for i in range(spans)
    ]
    return spans_table(rows)


def _stash(texts: TextStore, labels: list[str]) -> list[pa.Table]:
    return [texts.stash(_request(label)) for label in labels]


def _read(texts: TextStore, stashed: list[pa.Table]) -> list[tuple[str, str, str]]:
    rows = pa.concat_tables(stashed).select(["project", "trace_id", "span_id", TEXT_REF]).to_pylist()
    texts.fill(rows)
    return [(r.get("input_text", ""), r.get("output_text", ""), r["text_state"]) for r in rows]


def _expected(stashed: list[pa.Table], labels: list[str]) -> list[tuple[str, str, str]]:
    expected = []
    for table, label in zip(stashed, labels, strict=True):
        for i in range(table.num_rows):
            captured = i % 3 != 2
            prompt = f"{'You are a careful research agent. Cite every source you use. ' * 4} {label} step {i}: "
            expected.append(
                (prompt + f"find the filings of {label}", f"{label} answer {i}", "captured")
                if captured
                else ("", "", "not_captured")
            )
    return expected


def _files(texts: TextStore, suffix: str) -> list[Path]:
    return sorted(texts.directory.glob(f"*{suffix}"))


WAL_HEADER_BYTES = 20  # a write-ahead file with no frame left in it


def _wal_bytes(texts: TextStore) -> int:
    """The size of today's write-ahead file (one day's in these tests)."""
    (wal,) = _files(texts, ".awt")
    return wal.stat().st_size


def _sealed_texts(texts: TextStore) -> list[str]:
    """Every text the blocks files hold, decompressed."""
    found = []
    for path in _files(texts, text_blocks.BLOCK_SUFFIX):
        with open(path, "rb", buffering=0) as file:
            for block in text_blocks.read_fd(file.fileno(), os.fstat(file.fileno()).st_size).blocks:
                table = text_blocks.read_block(file.fileno(), block)
                found += table.column("input_text").to_pylist() + table.column("output_text").to_pylist()
    return found


def test_a_seal_compresses_the_frames_into_blocks_and_every_text_reads_back_under_its_span(tmp_path: Path) -> None:
    texts = TextStore(tmp_path / "texts", retention_days=0, seal_bytes=SEAL_BYTES, background_seal=False)
    labels = [f"company-{n}" for n in range(60)]
    stashed = _stash(texts, labels)
    before = texts.size_bytes()
    assert texts.seal() >= 2  # several blocks of about SEAL_BYTES
    (wal,) = _files(texts, ".awt")
    assert wal.stat().st_size == 20  # only its header is left: every frame is sealed
    assert texts.size_bytes() < before / 5  # the repeated instruction compressed across spans
    assert _read(texts, stashed) == _expected(stashed, labels)
    assert len(_sealed_texts(texts)) == 2 * 60 * 14  # the spans without text were left out
    more = _stash(texts, ["late-1", "late-2"])  # frames after the seal: the write-ahead file again
    assert _read(texts, stashed + more) == _expected(stashed + more, labels + ["late-1", "late-2"])
    texts.seal(1)
    assert _read(texts, stashed + more) == _expected(stashed + more, labels + ["late-1", "late-2"])
    reopened = TextStore(tmp_path / "texts", retention_days=0, seal_bytes=SEAL_BYTES, background_seal=False)
    assert _read(reopened, stashed + more) == _expected(stashed + more, labels + ["late-1", "late-2"])


def test_search_finds_texts_in_blocks_and_in_the_write_ahead_file_and_the_index_spares_blocks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    texts = TextStore(tmp_path / "texts", retention_days=0, seal_bytes=SEAL_BYTES, background_seal=False)
    labels = [f"company-{n}" for n in range(60)] + ["ZEBRA-corp"]
    stashed = _stash(texts, labels[:-1])
    texts.seal()
    stashed += _stash(texts, labels[-1:])
    trace_of = {label: t.column("trace_id")[0].as_py() for label, t in zip(labels, stashed, strict=True)}
    assert texts.search("p1", *WINDOW, "FILINGS OF company-17").trace_ids == [trace_of["company-17"]]
    assert texts.search("p1", *WINDOW, "zebra-corp answer").trace_ids == [trace_of["ZEBRA-corp"]]
    assert len(texts.search("p1", *WINDOW, "careful research").trace_ids) == 61
    assert texts.index() == 0  # the searches indexed every block and frame already
    read = []
    real = text_blocks.read_block
    monkeypatch.setattr(text_blocks, "read_block", lambda fd, block: read.append(block) or real(fd, block))
    assert texts.search("p1", *WINDOW, "filings of company-42").trace_ids == [trace_of["company-42"]]
    assert len(read) == 1  # the one block that holds it
    assert texts.search("p2", *WINDOW, "company-42").trace_ids == []  # another project's texts


_SEAL_AND_DIE = """
import sys
from agentwatch_platform.collector.storage.texts import TextStore
TextStore(sys.argv[1], retention_days=0, seal_bytes=1 << 30).seal(1)
"""


@pytest.mark.parametrize("torn", [False, True])
def test_a_crash_between_writing_a_block_and_cutting_the_file_loses_and_duplicates_nothing(
    tmp_path: Path, torn: bool
) -> None:
    """Killed after the block is synced, before the write-ahead file is cut: the frames are in both
    places. ``torn``: the block itself only half written, as a kill during its write leaves it."""
    directory = tmp_path / "texts"
    texts = TextStore(directory, retention_days=0, seal_bytes=1 << 30)
    labels = [f"company-{n}" for n in range(10)]
    stashed = _stash(texts, labels)
    texts.close()
    wal_before = _files(texts, ".awt")[0].read_bytes()
    killed = subprocess.run(
        [sys.executable, "-c", _SEAL_AND_DIE, str(directory)],
        env={**os.environ, FAULT_ENV: "texts_sealed"},
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert _files(texts, ".awt")[0].read_bytes() == wal_before  # not cut
    (blocks,) = _files(texts, text_blocks.BLOCK_SUFFIX)
    if torn:
        os.truncate(blocks, blocks.stat().st_size // 2)
    again = TextStore(directory, retention_days=0, seal_bytes=SEAL_BYTES, background_seal=False)
    assert _read(again, stashed) == _expected(stashed, labels)
    assert len(again.search("p1", *WINDOW, "careful research").trace_ids) == 10
    assert again.seal(1) == (1 if torn else 0)  # frames sealed already are not sealed twice, only cut
    assert _files(again, ".awt")[0].stat().st_size == 20
    more = _stash(again, ["after"])
    again.seal(1)
    expected = _expected(stashed + more, labels + ["after"])
    assert _read(again, stashed + more) == expected
    captured = [text for given, taken, state in expected if state == "captured" for text in (given, taken)]
    assert sorted(_sealed_texts(again)) == sorted(captured)  # each text in the blocks once
    assert list(directory.glob("*.tmp")) == []


def test_a_deletion_takes_the_texts_out_of_the_blocks_and_the_rest_still_reads(tmp_path: Path) -> None:
    texts = TextStore(tmp_path / "texts", retention_days=0, seal_bytes=SEAL_BYTES, background_seal=False)
    labels = [f"company-{n}" for n in range(40)]
    stashed = _stash(texts, labels)
    texts.seal()
    tail = _stash(texts, ["tail-0"])
    assert texts.search("p1", *WINDOW, "company-7 answer").trace_ids  # an index to drop
    gone = {stashed[7].column("trace_id")[0].as_py(), tail[0].column("trace_id")[0].as_py()}
    assert texts.remove("p1", gone, None) == 2 * 14
    assert not any("company-7" in t for t in _sealed_texts(texts))
    assert not any(b"tail-0" in path.read_bytes() for path in _files(texts, ".awt"))
    got = _read(texts, stashed + tail)
    want = _expected(stashed + tail, labels + ["tail-0"])
    for n in (7, 40):  # their spans show no text now; every other span its own
        for i in range(n * 20, n * 20 + 20):
            want[i] = ("", "", "not_captured") if i % 20 % 3 == 2 else ("", "", "damaged")
    assert got == want
    assert texts.search("p1", *WINDOW, "company-7 answer").trace_ids == []
    assert texts.search("p1", *WINDOW, "company-8 answer").trace_ids == [stashed[8].column("trace_id")[0].as_py()]
    assert texts.remove("p1", gone, None) == 0  # idempotent
    assert texts.remove("p1", None, None) == 39 * 14  # a whole project
    assert _sealed_texts(texts) == []


def test_the_background_sealer_seals_a_full_write_ahead_file_and_the_hourly_pass_a_quiet_one(tmp_path: Path) -> None:
    texts = TextStore(tmp_path / "texts", retention_days=0, seal_bytes=SEAL_BYTES)
    try:
        stashed = _stash(texts, [f"company-{n}" for n in range(30)])
        # The sealer may have run between two stashes (a loaded machine) and been woken again by a
        # later one: done once blocks exist and less than a block's worth is left in the file.
        wait_until(
            lambda: _files(texts, text_blocks.BLOCK_SUFFIX) and _wal_bytes(texts) < WAL_HEADER_BYTES + SEAL_BYTES,
            300,
            "the background sealer left a full write-ahead file",
        )
        assert texts.seal_failures == 0
        assert texts.seal_settled(NOW_NS) == 0  # today's few frames wait for more
        texts.seal_settled(NOW_NS + 3 * DAY_NS)  # a day before yesterday: sealed whole
        assert _wal_bytes(texts) == WAL_HEADER_BYTES
        assert {state for _, _, state in _read(texts, stashed)} == {"captured", "not_captured"}
    finally:
        texts.close()


def test_retention_expires_the_blocks_with_their_day(tmp_path: Path) -> None:
    now = time.time_ns()  # a stash expires the days past the retention of the real clock
    texts = TextStore(tmp_path / "texts", retention_days=7, seal_bytes=SEAL_BYTES, background_seal=False)
    old = replace(full_row(), trace_id=new_trace_id(), start_time_ns=now - 6 * DAY_NS, input_text="old")
    stashed = texts.stash(spans_table([old]))
    texts.seal(1)
    assert _files(texts, text_blocks.BLOCK_SUFFIX)
    assert len(texts.expire(now + 3 * DAY_NS)) == 2  # the write-ahead file and the blocks
    assert list(texts.directory.iterdir()) == []
    rows = stashed.select(["project", "trace_id", "span_id", TEXT_REF]).to_pylist()
    TextStore(tmp_path / "texts", retention_days=5).fill(rows)  # a day past its retention by the clock
    assert [r["text_state"] for r in rows] == ["removed"]


def test_a_failed_seal_is_counted_in_the_metrics_and_loses_nothing(tmp_path: Path) -> None:
    """The write-ahead file cannot be cut (a directory where its replacement goes): the block is
    written, the seal counted as failed on /metrics' counter, and every text still reads; the
    next seal cuts the file without sealing the frames twice."""
    texts = TextStore(tmp_path / "texts", retention_days=0, seal_bytes=SEAL_BYTES, background_seal=False)
    metrics = Metrics()
    metrics.bind(
        queued=lambda: 0.0,
        spool_bytes=lambda: 0.0,
        lease_overruns=lambda: 0.0,
        text_files=lambda: (texts.write_failures, texts.reopened, texts.seal_failures),
    )
    labels = [f"company-{n}" for n in range(10)]
    stashed = _stash(texts, labels)
    (wal,) = _files(texts, ".awt")
    in_the_way = wal.with_name(wal.name + ".tmp")
    in_the_way.mkdir()
    assert texts.seal(1) == 0
    assert texts.seal_failures == 1
    assert "agentwatch_collector_text_seal_failures_total 1.0" in generate_latest(metrics.registry).decode()
    assert _read(texts, stashed) == _expected(stashed, labels)
    in_the_way.rmdir()
    assert texts.seal(1) == 0  # sealed already: only cut
    assert wal.stat().st_size == 20
    assert _read(texts, stashed) == _expected(stashed, labels)
    assert len(_sealed_texts(texts)) == 2 * 10 * 14


FIXTURE_V1 = Path(__file__).parent / "fixtures" / "texts_v1"  # sealed by the first block format (AWB1)


def _versions(texts: TextStore) -> list[int]:
    (path,) = _files(texts, text_blocks.BLOCK_SUFFIX)
    with open(path, "rb", buffering=0) as file:
        return [b.version for b in text_blocks.read_fd(file.fileno(), os.fstat(file.fileno()).st_size).blocks]


def test_blocks_of_the_first_format_still_read_search_seal_beside_new_ones_and_delete(tmp_path: Path) -> None:
    """A day sealed by the code before word coding (the fixture: 8 traces reusing span ids, texts
    with and without non-ASCII letters): every text reads under its span, search finds them, new
    blocks of the current format are appended to the same file, and a deletion rewrites it."""
    directory = tmp_path / "texts"
    shutil.copytree(FIXTURE_V1, directory)
    rows = json.loads((directory / "rows.json").read_text())
    (directory / "rows.json").unlink()
    texts = TextStore(directory, retention_days=0, seal_bytes=SEAL_BYTES, background_seal=False)
    assert set(_versions(texts)) == {1}

    def read_back() -> list[tuple[str, str, str]]:
        copy = [{k: r[k] for k in ("project", "trace_id", "span_id", TEXT_REF)} for r in rows]
        texts.fill(copy)
        return [(r.get("input_text", ""), r.get("output_text", ""), r["text_state"]) for r in copy]

    want = [(r["input_text"], r["output_text"], "captured" if r["input_text"] else "not_captured") for r in rows]
    assert read_back() == want
    assert texts.search("p1", *WINDOW, "TRACE 3 STEP 1").trace_ids == ["03" * 16]
    assert len(texts.search("p1", *WINDOW, "ünïcode").trace_ids) == 8
    labels = [f"company-{n}" for n in range(5)]
    stashed = _stash(texts, labels)
    texts.seal(1)
    assert _versions(texts)[-1] == 2 and 1 in _versions(texts)
    assert read_back() == want
    assert _read(texts, stashed) == _expected(stashed, labels)
    assert texts.remove("p1", {"03" * 16}, None) == 4
    want = [
        ("", "", "damaged") if r["trace_id"] == "03" * 16 and w[2] == "captured" else w
        for r, w in zip(rows, want, strict=True)
    ]
    assert read_back() == want
    assert _read(texts, stashed) == _expected(stashed, labels)


def _record_codings(texts: TextStore) -> list[bytes]:
    """Each block's column codings (``text_blocks``' data layout: rows, sections, a byte per column)."""
    (path,) = _files(texts, text_blocks.BLOCK_SUFFIX)
    data = path.read_bytes()
    with open(path, "rb", buffering=0) as file:
        blocks = text_blocks.read_fd(file.fileno(), len(data)).blocks
    start = 20  # the record's head
    return [data[b.position + start + b.index_size + 8 :][: len(text_blocks.COLUMNS)] for b in blocks]


def test_texts_of_a_narrow_vocabulary_are_word_coded_and_read_back_byte_for_byte(tmp_path: Path) -> None:
    """Agents' prompts (the same words, step after step) with double, leading and trailing
    spaces, empty texts and non-ASCII letters: word-coded, smaller than plain, and exact."""
    rng = random.Random(7)
    vocabulary = ["search", "the", "filings", "of", "ACME", "Größe", "tool", "call:", "  ", "", "\n", "résumé"]
    rows = [
        replace(
            full_row(),
            trace_id=new_trace_id(),
            span_id=f"{i:016x}",
            start_time_ns=NOW_NS,
            input_text=" ".join(rng.choices(vocabulary, k=rng.randint(0, 80))),
            output_text=" " + " ".join(rng.choices(vocabulary, k=rng.randint(1, 30))) + " ",
        )
        for i in range(600)
    ]
    worded = TextStore(tmp_path / "worded", retention_days=0, seal_bytes=1 << 30, background_seal=False)
    stashed = worded.stash(spans_table(rows))
    worded.seal(1)
    assert _record_codings(worded) == [bytes([0, 0, 0, 1, 1])]  # keys plain, both texts word-coded
    copy = stashed.select(["project", "trace_id", "span_id", TEXT_REF]).to_pylist()
    worded.fill(copy)
    assert [(r["input_text"], r["output_text"]) for r in copy] == [(r.input_text, r.output_text) for r in rows]


def test_prose_of_a_wide_vocabulary_stays_plain(tmp_path: Path) -> None:
    source = (REPO / "docs").glob("*.md") if (REPO / "docs").is_dir() else []
    prose = "".join(p.read_text() for p in sorted(source))[:200_000] or (REPO / "README.md").read_text()
    rows = [
        replace(full_row(), trace_id=new_trace_id(), span_id=f"{i:016x}", start_time_ns=NOW_NS, input_text=chunk)
        for i, chunk in enumerate(prose[j : j + 500] for j in range(0, len(prose), 500))
    ]
    texts = TextStore(tmp_path / "prose", retention_days=0, seal_bytes=1 << 30, background_seal=False)
    stashed = texts.stash(spans_table(rows))
    texts.seal(1)
    assert _record_codings(texts)[0][3] == text_blocks.PLAIN
    copy = stashed.select(["project", "trace_id", "span_id", TEXT_REF]).to_pylist()
    texts.fill(copy)
    assert [r["input_text"] for r in copy] == [r.input_text for r in rows]


@pytest.mark.parametrize("distinct", [3, 300, 70_000])  # word ids of 1, 2 and 4 bytes
def test_word_coding_round_trips_every_id_width(distinct: int) -> None:
    values = [f"w{i % distinct}  x w{(i * 7) % distinct}" if i % 5 else "" for i in range(2 * distinct)]
    column = pa.array(values + [None], pa.string()).slice(1)
    sections = [pa.py_buffer(s) for s in text_blocks._words(column)]
    assert text_blocks._joined(len(column), *sections).to_pylist() == values[1:] + [""]


def test_a_seal_from_held_frames_writes_what_a_seal_reading_the_file_writes(tmp_path: Path) -> None:
    requests = [_request(f"company-{n}") for n in range(30)]
    for name in ("held", "read"):
        texts = TextStore(tmp_path / name, retention_days=0, seal_bytes=SEAL_BYTES, background_seal=False)
        for request in requests:
            texts.stash(request)
        if name == "read":  # a restarted collector: nothing held, every frame read back
            texts = TextStore(tmp_path / name, retention_days=0, seal_bytes=SEAL_BYTES, background_seal=False)
        assert texts.seal(1) >= 2
    (held,), (read,) = (sorted((tmp_path / n).glob("*.awb")) for n in ("held", "read"))
    assert held.read_bytes() == read.read_bytes()


def test_a_write_ahead_file_replaced_under_the_store_is_sealed_as_the_file_is_not_as_held(tmp_path: Path) -> None:
    texts = TextStore(tmp_path / "a", retention_days=0, seal_bytes=SEAL_BYTES, background_seal=False)
    _stash(texts, [f"held-{n}" for n in range(5)])
    other = TextStore(tmp_path / "b", retention_days=0, seal_bytes=SEAL_BYTES, background_seal=False)
    _stash(other, [f"restored-{n}" for n in range(7)])
    (wal,) = _files(other, ".awt")
    os.replace(wal, _files(texts, ".awt")[0])
    texts.seal(1)
    sealed = _sealed_texts(texts)
    assert any("restored-6" in t for t in sealed)
    assert not any("held-" in t for t in sealed)


def test_frames_past_what_the_sealer_may_hold_are_read_back_from_the_file(tmp_path: Path) -> None:
    """A sealer that falls behind: memory holds ``_HELD_BLOCKS`` blocks' worth of frames, the rest
    stay on disk only, and one seal takes both kinds, every text under its span."""
    texts = TextStore(tmp_path / "texts", retention_days=0, seal_bytes=SEAL_BYTES, background_seal=False)
    labels = [f"company-{n}" for n in range(150)]
    stashed = _stash(texts, labels)
    assert sum(p.stat().st_size for p in _files(texts, ".awt")) > _HELD_BLOCKS * SEAL_BYTES
    assert 0 < texts._held_bytes <= _HELD_BLOCKS * SEAL_BYTES  # noqa: SLF001 - the bound itself
    assert texts.seal(1) >= 10
    assert texts._held_bytes == 0  # noqa: SLF001 - sealed frames are let go
    assert _read(texts, stashed) == _expected(stashed, labels)
    assert len(_sealed_texts(texts)) == 2 * 150 * 14
