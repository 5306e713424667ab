"""The trigram filters of ``collector.storage.text_index`` never rule out a block that the exact
search (``pc.match_substring(ignore_case=True)``, what ``TextStore.search`` runs) would match."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agentwatch_platform.collector.storage.text_index import bloom_of, may_hold, needle_trigrams

# ASCII letters with the characters whose case orbit crosses ASCII or that lower oddly.
ALPHABET = "abcKkSsxyz -.\u212a\u017f\u0130\u0131\u00df\u1e9e\u03a3\u03c3\u03c2\u00fc\u00dc"
texts_strategy = st.lists(st.text(alphabet=ALPHABET, max_size=40), min_size=1, max_size=8)


def _matches(texts: list[str], needle: str) -> bool:
    return bool(pc.any(pc.match_substring(pa.array(texts, pa.string()), needle, ignore_case=True)).as_py())


@settings(max_examples=400, deadline=None)
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
