"""The trigram filters of ``collector.storage.text_index`` never rule out a block that the exact
search (``pc.match_substring(ignore_case=True)``, what ``TextStore.search`` runs) would match; the
day files' indexes answer as a scan does, also damaged, stale or deleted, and spare the frames they rule out."""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agentwatch_platform.collector.storage import texts as text_files
from agentwatch_platform.collector.storage.chdb_store import ChdbStore
from agentwatch_platform.collector.storage.columns import spans_table
from agentwatch_platform.collector.storage.maintenance import RetentionPass
from agentwatch_platform.collector.storage.text_index import bloom_of, may_hold, needle_trigrams
from agentwatch_platform.collector.storage.texts import DAY_NS, TextStore
from tests.collector.factories import new_trace_id
from tests.collector.test_store import full_row
from tests.support.examples import examples

# ASCII letters with the characters whose case orbit crosses ASCII or that lower oddly.
ALPHABET = "abcKkSsxyz -.\u212a\u017f\u0130\u0131\u00df\u1e9e\u03a3\u03c3\u03c2\u00fc\u00dc"
texts_strategy = st.lists(st.text(alphabet=ALPHABET, max_size=40), min_size=1, max_size=8)


def _matches(texts: list[str], needle: str) -> bool:
    return bool(pc.any(pc.match_substring(pa.array(texts, pa.string()), needle, ignore_case=True)).as_py())


@settings(max_examples=examples(400), deadline=None)
@given(texts=texts_strategy, needle=st.text(alphabet=ALPHABET, min_size=1, max_size=8), data=st.data())
@example(texts=["\u017fsx"], needle="SSX", data=None)  # RE2 folds LONG S to s
@example(texts=["x\u212akk"], needle="kkk", data=None)  # and KELVIN SIGN to k
def test_a_block_that_matches_is_never_ruled_out(texts: list[str], needle: str, data: st.DataObject) -> None:
    if data is not None and data.draw(st.booleans()):  # a needle cut out of a text, in another case: a hit
        text = data.draw(st.sampled_from(texts))
        start = data.draw(st.integers(0, len(text)))
        needle = (text[start : start + data.draw(st.integers(1, 10))] or needle).swapcase()
    trigrams = needle_trigrams(needle)
    if trigrams is None or not _matches(texts, needle):
        return
    assert may_hold(bloom_of([pa.array(texts, pa.string())]), trigrams)


def test_filters_rule_out_blocks_without_the_needle_and_pass_those_with_it() -> None:
    words = [f"word{i} order-{i:05d} the {'MIXED Case' if i % 2 else 'lower'}" for i in range(2000)]
    bloom = bloom_of([pa.array(words), pa.array(["", "completion text"])])
    assert may_hold(bloom, needle_trigrams("ORDER-01234"))
    assert may_hold(bloom, needle_trigrams("mixed case"))
    assert may_hold(bloom, needle_trigrams("ion tex"))
    assert not may_hold(bloom, needle_trigrams("zebra"))
    assert not may_hold(bloom, needle_trigrams("order-99999 "))


def test_needles_the_filters_cannot_answer_for_scan_every_block() -> None:
    assert needle_trigrams("ab") is None
    assert needle_trigrams("ZÜRICH") is None
    assert may_hold(b"\xff" + b"\x00" * 3, needle_trigrams("abc"))  # not a filter it wrote: scanned


# --- the index of a day file, through TextStore.search ---------------------------------------------
NOW_NS = time.time_ns()
WINDOW = (NOW_NS - DAY_NS, NOW_NS + DAY_NS)
WORDS = st.sampled_from(["alpha", "Beta", "gamma-7", "ORDER-42", "\u017fun", "\u212aey", "z\u00fcrich", "x"])
frames_strategy = st.lists(
    st.lists(st.tuples(st.lists(WORDS, max_size=4), st.lists(WORDS, max_size=3)), min_size=1, max_size=4),
    min_size=1,
    max_size=4,
)


def _stash(texts: TextStore, frames: list[list[tuple[list[str], list[str]]]]) -> list:
    """One stash (one frame) per frame, a trace per span; the rows written."""
    base = replace(full_row(), start_time_ns=NOW_NS - 10**9, end_time_ns=NOW_NS)
    written = []
    for frame in frames:
        rows = [
            replace(base, trace_id=new_trace_id(), span_id=f"{i:016x}", input_text=" ".join(a), output_text=" ".join(b))
            for i, (a, b) in enumerate(frame)
        ]
        texts.stash(spans_table(rows))
        written += rows
    return written


def _expected(rows: list, needle: str) -> list[str]:
    texts = pa.array([r.input_text for r in rows] + [r.output_text for r in rows], pa.string())
    hits = pc.match_substring(texts, needle, ignore_case=True).to_pylist()
    return sorted({r.trace_id for r, a, b in zip(rows, hits[: len(rows)], hits[len(rows) :], strict=True) if a or b})


@settings(max_examples=examples(60), deadline=None)
@given(
    frames=frames_strategy,
    needles=st.lists(st.one_of(WORDS, st.text(alphabet="abeKrstz -\u017f", max_size=6)), max_size=4),
)
@example(frames=[[(["\u017fun"], ["\u212aey"])]], needles=["SUN", "key"])  # RE2 folds LONG S and KELVIN SIGN
def test_a_search_through_the_index_finds_what_a_scan_finds(frames: list, needles: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        texts = TextStore(Path(tmp) / "texts", retention_days=0)
        rows = _stash(texts, frames)
        for needle in [*needles, "alpha", "order-42"]:
            if not needle:
                continue
            scanned = texts.search("p1", *WINDOW, needle)  # the first search writes the index
            indexed = texts.search("p1", *WINDOW, needle)
            assert sorted(scanned.trace_ids) == sorted(indexed.trace_ids) == _expected(rows, needle)
            assert sorted(scanned.span_keys) == sorted(indexed.span_keys)
        written = list(Path(tmp, "texts").glob("*.awt"))
        assert len(list(Path(tmp, "texts").glob("*.awi"))) == len(written)  # none when no text was captured


def _one_index(tmp_path: Path) -> Path:
    (index,) = (tmp_path / "texts").glob("*.awi")
    return index


def test_the_index_passes_over_frames_without_the_needle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    texts = TextStore(tmp_path / "texts", retention_days=0)
    _stash(texts, [[(["alpha"], [])]] * 5 + [[(["ORDER-42 shipped"], [])]])
    assert texts.search("p1", *WINDOW, "order-42").trace_ids  # builds the index
    decoded = []
    real_block = text_files._block
    monkeypatch.setattr(text_files, "_block", lambda payload: decoded.append(1) or real_block(payload))
    assert len(texts.search("p1", *WINDOW, "order-42").trace_ids) == 1
    assert len(decoded) == 1  # the one frame that holds it; the five others passed by their headers
    assert len(texts.search("p1", *WINDOW, "lph").trace_ids) == 5


def test_a_damaged_index_or_a_rewritten_frame_falls_back_to_scanning(tmp_path: Path) -> None:
    texts = TextStore(tmp_path / "texts", retention_days=0)
    rows = _stash(texts, [[(["alpha beta"], ["gamma"])], [(["alpha"], [])], [(["beta"], ["ORDER-42"])]])
    expected = {needle: _expected(rows, needle) for needle in ("alpha", "beta", "order-42", "gamma")}
    for needle in expected:
        assert sorted(texts.search("p1", *WINDOW, needle).trace_ids) == expected[needle]
    index = _one_index(tmp_path)
    data = bytearray(index.read_bytes())
    for at in range(20, len(data), 97):  # flipped bytes all over the records
        data[at] ^= 0xFF
    index.write_bytes(bytes(data))
    for needle in expected:
        assert sorted(texts.search("p1", *WINDOW, needle).trace_ids) == expected[needle]
    index.write_bytes(b"garbage" * 50)
    for needle in expected:
        assert sorted(texts.search("p1", *WINDOW, needle).trace_ids) == expected[needle]
    for needle in expected:  # records of other frames: a day file replaced under an index
        assert sorted(texts.search("p1", *WINDOW, needle).trace_ids) == expected[needle]
    (day_file,) = (tmp_path / "texts").glob("*.awt")
    os.truncate(day_file, 9)  # every frame gone, then one appended at the first offset
    again = _stash(texts, [[(["delta"], ["ORDER-42"])]])
    assert sorted(texts.search("p1", *WINDOW, "order-42").trace_ids) == _expected(again, "order-42")
    assert sorted(texts.search("p1", *WINDOW, "delta").trace_ids) == _expected(again, "delta")


def test_a_deletion_drops_the_index_and_retention_expires_it(tmp_path: Path) -> None:
    texts = TextStore(tmp_path / "texts", retention_days=7)
    rows = _stash(texts, [[(["alpha secret"], [])], [(["beta"], [])]])
    texts.search("p1", *WINDOW, "secret")
    assert _one_index(tmp_path).exists()
    assert texts.remove("p1", {rows[0].trace_id}, None) == 1
    assert not list((tmp_path / "texts").glob("*.awi"))
    assert texts.search("p1", *WINDOW, "secret").trace_ids == []
    assert texts.search("p1", *WINDOW, "beta").trace_ids == [rows[1].trace_id]
    assert texts.size_bytes() == sum(p.stat().st_size for p in (tmp_path / "texts").iterdir())
    assert texts.expire(NOW_NS + 30 * DAY_NS) and not list((tmp_path / "texts").iterdir())


def test_the_retention_pass_indexes_new_frames_so_a_search_reads_only_its_hits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = ChdbStore(tmp_path / "chdb", result_cache_s=0, retention_days=0)
    try:
        texts = store.texts
        _stash(texts, [[(["alpha"], [])]] * 3 + [[(["ORDER-42"], [])]])
        RetentionPass(lambda: store, 0, may_run=lambda: True).run_once()
        assert texts.index() == 0  # nothing new since the pass
        _stash(texts, [[(["beta"], [])]])
        decoded = []
        real_block = text_files._block
        monkeypatch.setattr(text_files, "_block", lambda payload: decoded.append(1) or real_block(payload))
        assert len(texts.search("p1", *WINDOW, "order-42").trace_ids) == 1
        assert len(decoded) == 2  # the hit, and the frame written after the pass
    finally:
        store.close()
