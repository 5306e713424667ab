"""The deterministic answer policy of the simulated engine: what the "model" says.

It reads the messages and the offered tools, never calls anything, and always gives the
same answer to the same request, so runs are reproducible and tests can assert on them.

With research tools offered (a tool named ``search`` and/or ``fetch``) it behaves like a
research agent's model:

- the task question is the text after ``Question:`` in the first user message, or that
  message's first line;
- its difficulty (a hash of the question) sets how many distinct documents it wants
  (``2 + h % 4``) and how long its report is (about 120-520 tokens);
- it searches the question's keywords first, then fetches document ids found in earlier
  tool results that it has not fetched yet, one tool call per turn; when the searches give
  no new ids it searches again with another subset of keywords (at most 3 searches);
- with enough documents, or nothing left to try, it writes the report, as plain content or
  as a call to a report tool when one is offered (a tool whose name contains ``report``,
  ``answer`` or ``finish``).

Document ids are read from tool results: JSON fields ``"id"`` / ``"doc_id"`` (in a list or
object), otherwise ``[id]`` citations. A user message that asks whether there is enough
(``... enough ...?``) gets ``yes`` or ``no`` with one reason, from the number of documents read.
Without research tools, a conversation that mentions a report gets one; anything else is
plain chat: a short deterministic reply.

Bounded-context agents (which do not resend the tool history) keep the policy informed by
citing what they have read as ``[id]`` in the text they send: cited ids count as read, and
ids in JSON (``"id": ...``) as found.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

_WORD_RE = re.compile(r"[A-Za-z][A-Za-z0-9'-]{2,}")
_ID_FIELD_RE = re.compile(r'"(?:id|doc_id)"\s*:\s*"([^"]{1,80})"')
_CITATION_RE = re.compile(r"\[([A-Za-z0-9][\w.:-]{0,79})\]")
_ENOUGH_RE = re.compile(r"\benough\b[^?]*\?", re.IGNORECASE)
_REPORT_TOOL_RE = re.compile(r"report|answer|finish", re.IGNORECASE)
_REPORT_WORD_RE = re.compile(r"\breport\b", re.IGNORECASE)
_STOPWORDS = frozenset(
    """the and for are but not you all any can had her was one our out day get has him his how man
    new now old see two way who boy did its let put say she too use what when where which why with
    this that from they will would there their about into than then them these those been have
    were does your some could should also more most such only other over very just like make
    please give tell explain describe question answer report write find enough text title
    snippet content score url doc_id""".split()
)
MAX_SEARCHES = 3
_FILLER = (
    "The evidence points to",
    "Taken together, the sources show",
    "A closer reading suggests",
    "In practice this means",
    "One caveat is that",
    "The documents agree that",
)


@dataclass(frozen=True)
class ToolCall:
    """A call the model asks for: tool name and JSON arguments."""

    name: str
    arguments: str


@dataclass(frozen=True)
class Answer:
    """The complete assistant turn: text, or tool calls (never both)."""

    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = field(default_factory=tuple)


def _digest(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


def _text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    return "" if content is None else str(content)


def _keywords(text: str) -> list[str]:
    """Distinct content words in order of appearance."""
    seen: dict[str, None] = {}
    for word in _WORD_RE.findall(text):
        lowered = word.lower()
        if lowered not in _STOPWORDS:
            seen.setdefault(lowered, None)
    return list(seen)


def task_question(messages: Sequence[Mapping[str, Any]]) -> str:
    """The research question of a conversation (see the module docstring)."""
    first_user = next((_text(m) for m in messages if m.get("role") == "user"), "")
    for line in first_user.splitlines():
        if line.strip().lower().startswith("question:"):
            return line.split(":", 1)[1].strip()
    return first_user.strip().splitlines()[0] if first_user.strip() else ""


def docs_wanted(question: str) -> int:
    """How many distinct documents a question needs: 2 to 5, by difficulty hash."""
    return 2 + _digest(question) % 4


def doc_ids(text: str) -> list[str]:
    """Document ids mentioned in a tool result or message, in order, without repeats."""
    ids = _ID_FIELD_RE.findall(text) or _CITATION_RE.findall(text)
    return list(dict.fromkeys(ids))


def _tool_names(tools: Sequence[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    named: dict[str, Mapping[str, Any]] = {}
    for tool in tools:
        function = tool.get("function", tool) if isinstance(tool, Mapping) else {}
        if isinstance(function, Mapping) and function.get("name"):
            named[str(function["name"])] = function
    return named


def _first_param(function: Mapping[str, Any], default: str) -> str:
    """The first required (else first) parameter name of a tool's JSON schema."""
    params = function.get("parameters") or {}
    required = params.get("required") or []
    if required:
        return str(required[0])
    properties = params.get("properties") or {}
    return str(next(iter(properties), default))


@dataclass
class _History:
    """What earlier turns of a research conversation did."""

    searches: list[str] = field(default_factory=list)
    fetched: list[str] = field(default_factory=list)
    found: list[str] = field(default_factory=list)
    snippets: list[str] = field(default_factory=list)


def _history(messages: Sequence[Mapping[str, Any]]) -> _History:
    history = _History()
    calls: dict[str, tuple[str, dict[str, Any]]] = {}
    for message in messages:
        for call in message.get("tool_calls") or ():
            function = call.get("function", {})
            try:
                arguments = json.loads(function.get("arguments") or "{}")
            except (TypeError, json.JSONDecodeError):
                arguments = {}
            calls[str(call.get("id"))] = (str(function.get("name")), arguments if isinstance(arguments, dict) else {})
        if message.get("role") == "tool":
            name, arguments = calls.get(str(message.get("tool_call_id")), ("", {}))
            _record_result(history, name, arguments, _text(message))
        else:
            _record_mentions(history, _text(message))
    return history


def _record_mentions(history: _History, text: str) -> None:
    """Ids cited as ``[id]`` count as read, ids in JSON as found (bounded-context agents)."""
    for cited in _CITATION_RE.findall(text):
        if cited not in history.fetched:
            history.fetched.append(cited)
    history.found.extend(i for i in _ID_FIELD_RE.findall(text) if i not in history.found)
    if history.found or history.fetched:
        history.snippets.append(text)


def _record_result(history: _History, name: str, arguments: dict[str, Any], result: str) -> None:
    if name == "search":
        history.searches.append(str(next(iter(arguments.values()), "")))
        history.found.extend(i for i in doc_ids(result) if i not in history.found)
    elif name == "fetch" and "error" not in result[:200].lower():
        fetched_id = str(next(iter(arguments.values()), ""))
        if fetched_id and fetched_id not in history.fetched:
            history.fetched.append(fetched_id)
            history.snippets.append(result)


def decide(messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] = ()) -> Answer:
    """The assistant's next turn for this conversation."""
    last_user = next((_text(m) for m in reversed(messages) if m.get("role") == "user"), "")
    if messages and messages[-1].get("role") == "user" and _ENOUGH_RE.search(last_user):
        return _enough_answer(messages)
    named = _tool_names(tools)
    if "search" in named or "fetch" in named:
        return _research_turn(messages, named)
    if any(_REPORT_WORD_RE.search(_text(m)) for m in messages):
        return Answer(content=_report(task_question(messages), _history(messages)))
    return Answer(content=_chat_reply(messages))


def _enough_answer(messages: Sequence[Mapping[str, Any]]) -> Answer:
    read = len(_history(messages).fetched)
    wanted = docs_wanted(task_question(messages))
    if read >= wanted:
        return Answer(content=f"yes: {read} documents cover the question.")
    return Answer(content=f"no: {read} of the {wanted} documents needed so far.")


def _research_turn(messages: Sequence[Mapping[str, Any]], named: dict[str, Mapping[str, Any]]) -> Answer:
    question = task_question(messages)
    history = _history(messages)
    if len(history.fetched) < docs_wanted(question):
        call = _next_tool_call(question, history, named)
        if call is not None:
            return Answer(tool_calls=(call,))
    report = _report(question, history)
    report_tool = next((name for name in named if _REPORT_TOOL_RE.search(name)), None)
    if report_tool is None:
        return Answer(content=report)
    param = _first_param(named[report_tool], "report")
    return Answer(tool_calls=(ToolCall(report_tool, json.dumps({param: report})),))


def _next_tool_call(question: str, history: _History, named: dict[str, Mapping[str, Any]]) -> ToolCall | None:
    pending = [i for i in history.found if i not in history.fetched]
    if pending and "fetch" in named:
        param = _first_param(named["fetch"], "id")
        return ToolCall("fetch", json.dumps({param: pending[0]}))
    if "search" in named and len(history.searches) < MAX_SEARCHES:
        param = _first_param(named["search"], "query")
        attempt = len(history.searches) + len(history.fetched)
        return ToolCall("search", json.dumps({param: _search_query(question, attempt)}))
    return None


def _search_query(question: str, attempt: int) -> str:
    """The question's keywords; later attempts rotate through them for other results."""
    words = _keywords(question) or ["overview"]
    shift = attempt * 2 % max(len(words), 1)
    rotated = words[shift:] + words[:shift]
    return " ".join(rotated[: 6 - attempt])


def _report(question: str, history: _History) -> str:
    """A report of task-dependent length citing the fetched documents."""
    target_words = 90 + _digest("len:" + question) % 300
    sources = history.fetched or history.found[:3]
    ids = {i.lower() for i in history.found + history.fetched}
    pool = [w for w in _keywords(" ".join(history.snippets)) if w not in ids]
    pool = pool or _keywords(question) or ["evidence"]
    lines = [f"# Report: {question}", ""]
    words, index = 0, 0
    while words < target_words:
        chosen = [pool[(index * 7 + k) % len(pool)] for k in range(5)]
        cite = f" [{sources[index % len(sources)]}]" if sources else ""
        sentence = (
            f"{_FILLER[index % len(_FILLER)]} {', '.join(chosen[:3])} relate to {chosen[3]} and {chosen[4]}{cite}."
        )
        lines.append(sentence)
        words += len(sentence.split())
        index += 1
    if sources:
        lines += ["", "Sources: " + ", ".join(sources)]
    return "\n".join(lines)


def _chat_reply(messages: Sequence[Mapping[str, Any]]) -> str:
    last_user = next((_text(m) for m in reversed(messages) if m.get("role") == "user"), "")
    topic = _keywords(last_user)[:4] or ["that"]
    sentences = 1 + _digest(last_user) % 6
    body = " ".join(
        f"{_FILLER[(i + len(topic)) % len(_FILLER)]} {topic[i % len(topic)]} matters here." for i in range(sentences)
    )
    return f"(simulated engine) You asked about {', '.join(topic)}. {body}"
