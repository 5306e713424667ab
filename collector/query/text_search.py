"""The lists' search over captured text kept outside the spans table (an embedded store's text
files): asked for the newest matches first, in growing steps, so a word in every run costs what a
page needs, not what the retention holds.

A list (runs, spans) takes the first step's matches; only when its page comes back short of its
limit while the text store stopped early does it ask again for ten times as many. When the last
step it took stopped early, the list says so in a warning: its rows and total are then those of the
newest matches only (bench/results/search.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, TypeVar

from agentwatch_platform.collector.storage.base import Store

if TYPE_CHECKING:  # the text store loads pyarrow: the CLI imports this module before any command runs
    from agentwatch_platform.collector.storage.texts import TextSearch

# Captured text is filed by the UTC day of its span's start; a run's later spans may start after the
# range's end, so the search reads a day past it.
TEXT_LOOKAHEAD_NS = 86_400 * 10**9
# Traces asked for at each step. The first covers ~20 pages of runs; the last bounds the traces
# passed to the list's query.
STEPS = (1_000, 10_000, 100_000)
Rows = TypeVar("Rows")


def steps(
    store: Store, project: str, start_ns: int, end_ns: int, needle: str, *, most: int = STEPS[-1]
) -> Iterator[TextSearch]:
    """The text store's matches for ``needle`` in [start_ns, end_ns), one step after another,
    until a step reaches the range's start or asks for ``most`` runs."""
    for limit in (step for step in STEPS if step <= most):
        found = store.search_texts(project, start_ns, end_ns + TEXT_LOOKAHEAD_NS, needle, limit=limit)
        yield found
        if found.complete:
            return


def until_enough(
    store: Store,
    search: tuple[str, int, int, str],
    query: Callable[[TextSearch], Rows],
    enough: Callable[[Rows], bool],
    *,
    most: int = STEPS[-1],
) -> tuple[Rows, TextSearch]:
    """``query``'s answer with each step's matches (``search``: project, start and end ns, needle),
    until ``enough`` says the answer is, or the steps end; and the last step's matches."""
    for found in steps(store, *search, most=most):
        answer = query(found)
        if enough(answer):
            break
    return answer, found


def warnings(found: TextSearch, what: str) -> list[str]:
    """What a list says about its text search: files it could not read, and a search stopped early
    (``what``: the list's rows, "runs" or "spans")."""
    lines = [f"captured text not searched: {line}" for line in found.unreadable]
    if not found.complete:
        lines.append(
            f"captured text: the search stopped at the newest {len(found.trace_ids):,} runs that match; "
            f"these {what} and their total come from those runs only (narrow the time range for older ones)"
        )
    return lines
