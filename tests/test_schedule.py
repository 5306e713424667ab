"""The test files' order (``tests.support.schedule``): the longest expected first, whole files,
each file's tests as collected; a test's seconds are its last run's, else a guess by its markers."""

from __future__ import annotations

from typing import Any, cast

import pytest

from tests.support.schedule import DEFAULT_S, GUESS_S, longest_files_first, record, unit_of_work


class _Item:
    """What the order reads of a ``pytest.Item``: its node id and its markers."""

    def __init__(self, nodeid: str, *marks: str) -> None:
        self.nodeid = nodeid
        self.marks = [getattr(pytest.mark, name).mark for name in marks]

    def iter_markers(self) -> list[pytest.Mark]:
        return self.marks


def _order(items: list[_Item], known: dict[str, float]) -> list[str]:
    as_items = cast(list[Any], items)
    longest_files_first(as_items, known)
    return [item.nodeid for item in as_items]


def test_the_file_that_took_longest_last_time_runs_first() -> None:
    items = [_Item("a.py::t1"), _Item("a.py::t2"), _Item("b.py::t1"), _Item("c.py::t1")]
    known = {"a.py::t1": 1.0, "a.py::t2": 2.0, "b.py::t1": 5.0, "c.py::t1": 0.1}
    assert _order(items, known) == ["b.py::t1", "a.py::t1", "a.py::t2", "c.py::t1"]


def test_a_test_never_run_here_is_guessed_by_its_markers() -> None:
    many_quick = [_Item(f"many.py::t{i}") for i in range(20)]
    items = [*many_quick, _Item("browser.py::t", "browser"), _Item("demo.py::t", "slow")]
    assert GUESS_S["slow"] > GUESS_S["browser"] > 20 * DEFAULT_S > 0
    assert [nodeid.split("::")[0] for nodeid in _order(items, {})][:3] == ["demo.py", "browser.py", "many.py"]


def test_without_figures_files_go_by_their_test_count_as_collected_among_equals() -> None:
    items = [_Item("one.py::t"), _Item("two.py::t1"), _Item("two.py::t2"), _Item("also_one.py::t")]
    assert _order(items, {}) == ["two.py::t1", "two.py::t2", "one.py::t", "also_one.py::t"]


def test_a_run_records_each_tests_phases_summed_and_keeps_the_tests_it_did_not_run() -> None:
    phases = [("a.py::t", 0.5), ("a.py::t", 2.0), ("a.py::t", 0.25), ("b.py::t", 1.0)]
    assert record({"a.py::t": 9.0, "c.py::t": 3.0}, phases) == {"a.py::t": 2.75, "b.py::t": 1.0, "c.py::t": 3.0}


def test_the_files_of_a_shared_folder_are_one_unit_ordered_by_their_sum() -> None:
    items = [_Item("tests/dashboard/a.py::t"), _Item("tests/x.py::t"), _Item("tests/dashboard/b.py::t")]
    known = {"tests/dashboard/a.py::t": 2.0, "tests/x.py::t": 3.0, "tests/dashboard/b.py::t": 2.5}
    assert _order(items, known) == ["tests/dashboard/b.py::t", "tests/dashboard/a.py::t", "tests/x.py::t"]
    assert unit_of_work("tests/dashboard/b.py::t") == "tests/dashboard/" != unit_of_work("tests/x.py::t")
