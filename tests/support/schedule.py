"""The longest test files start first, so that two workers end together.

``make test`` and ``make quick`` run ``pytest -n 2 --dist loadfile``: a worker takes a whole file
at a time, in the order the files are collected (``tests/conftest.py`` turns xdist's own order, by
test count, off). A long file that starts near the end leaves the other worker idle until it is
done, so the files are ordered by their expected seconds, longest first (the classic longest
processing time first rule).

A test's expected seconds are those its last run took (every phase, set-up included), kept in
pytest's cache (``.pytest_cache``) under ``CACHE_KEY``. A test that has not run here yet (a fresh
clone) is guessed from its markers: ``slow`` ones take a minute or more, ``browser`` and
``clients`` ones start a browser or a whole stack; the rest are counted alike, which is xdist's
own order (by test count) among files without a marked test.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

import pytest

CACHE_KEY = "agentwatch/test_seconds"
GUESS_S = {"slow": 60.0, "browser": 15.0, "clients": 3.0}  # a test never run here: by its markers
DEFAULT_S = 0.5


def expected_seconds(item: pytest.Item, known: dict[str, float]) -> float:
    if item.nodeid in known:
        return known[item.nodeid]
    return max((GUESS_S[mark.name] for mark in item.iter_markers() if mark.name in GUESS_S), default=DEFAULT_S)


def longest_files_first(items: list[pytest.Item], known: dict[str, float]) -> None:
    """Reorder ``items`` in place: whole files, the longest expected first; within a file, as collected."""
    by_file: dict[str, list[pytest.Item]] = defaultdict(list)
    for item in items:
        by_file[item.nodeid.split("::", 1)[0]].append(item)
    seconds = {path: sum(expected_seconds(item, known) for item in tests) for path, tests in by_file.items()}
    items[:] = [item for path in sorted(by_file, key=lambda p: -seconds[p]) for item in by_file[path]]


def record(known: dict[str, float], phases: Iterable[tuple[str, float]]) -> dict[str, float]:
    """``known`` updated with the seconds of each test in ``phases`` ((test, seconds) of its set-up, call
    and tear-down)."""
    ran: dict[str, float] = defaultdict(float)
    for nodeid, seconds in phases:
        ran[nodeid] += seconds
    return {**known, **{nodeid: round(seconds, 2) for nodeid, seconds in ran.items()}}
