"""The research agent's tools: ``search`` and ``fetch`` over the bundled corpus.

The corpus is local, so the tools are fast and deterministic; real tool I/O is slow and
unreliable, so ``ToolConfig`` adds latency, failures and timeouts drawn from a seeded RNG.
That is what lets the agent's retries, its cache and the platform's tool-failure and
timeout views be exercised on a laptop.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import math
import random
import re
from collections import Counter, OrderedDict
from dataclasses import dataclass
from pathlib import Path

CORPUS_PATH = Path(__file__).with_name("corpus") / "corpus.jsonl.gz"
_WORD = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")


class ToolError(Exception):
    """A tool call failed; the agent may retry it."""


class ToolFailure(ToolError):
    """The tool answered with an error (a simulated 5xx, a dropped connection)."""


class ToolTimeout(ToolError, TimeoutError):
    """The tool did not answer within its timeout; a ``TimeoutError``, so it is traced as one."""


class UnknownDocument(ToolError):
    """``fetch`` was asked for a document id that is not in the corpus."""


def _terms(text: str) -> list[str]:
    return _WORD.findall(text.lower())


@dataclass(frozen=True)
class Document:
    id: str
    title: str
    topic: str
    text: str


@dataclass(frozen=True)
class SearchHit:
    doc_id: str
    title: str
    snippet: str
    score: float


class Corpus:
    """Documents with a BM25 index (k1=1.5, b=0.75) over title and text."""

    def __init__(self, documents: list[Document], *, k1: float = 1.5, b: float = 0.75) -> None:
        if not documents:
            raise ValueError("corpus: no documents")
        self._docs = {doc.id: doc for doc in documents}
        self._k1, self._b = k1, b
        self._tf = {doc.id: Counter(_terms(doc.title + " " + doc.text)) for doc in documents}
        self._len = {doc_id: sum(tf.values()) for doc_id, tf in self._tf.items()}
        self._avg_len = sum(self._len.values()) / len(self._len)
        df = Counter(term for tf in self._tf.values() for term in tf)
        n = len(documents)
        self._idf = {term: math.log(1 + (n - count + 0.5) / (count + 0.5)) for term, count in df.items()}

    @classmethod
    def load(cls, path: Path = CORPUS_PATH) -> Corpus:
        """Read a gzipped JSONL corpus (``id``, ``title``, ``topic``, ``text`` per line)."""
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            documents = [Document(**json.loads(line)) for line in fh if line.strip()]
        return cls(documents)

    def __len__(self) -> int:
        return len(self._docs)

    def get(self, doc_id: str) -> Document:
        try:
            return self._docs[doc_id.strip()]
        except KeyError:
            raise UnknownDocument(f"fetch: no document {doc_id!r} in the corpus (ids look like 'doc-0042')") from None

    def search(self, query: str, k: int = 5) -> list[SearchHit]:
        """The ``k`` best documents for ``query`` by BM25; ties broken by id for determinism."""
        terms = [t for t in dict.fromkeys(_terms(query)) if t in self._idf]
        scored = [(self._score(doc_id, terms), doc_id) for doc_id in self._docs]
        best = sorted((s for s in scored if s[0] > 0), key=lambda s: (-s[0], s[1]))[:k]
        return [self._hit(doc_id, score, terms) for score, doc_id in best]

    def _score(self, doc_id: str, terms: list[str]) -> float:
        tf, norm = self._tf[doc_id], self._k1 * (1 - self._b + self._b * self._len[doc_id] / self._avg_len)
        return sum(self._idf[t] * tf[t] * (self._k1 + 1) / (tf[t] + norm) for t in terms if t in tf)

    def _hit(self, doc_id: str, score: float, terms: list[str]) -> SearchHit:
        doc = self._docs[doc_id]
        sentences = re.split(r"(?<=\.)\s+", doc.text)
        snippet = max(sentences, key=lambda s: sum(t in s.lower() for t in terms))
        return SearchHit(doc_id, doc.title, snippet, round(score, 3))


@dataclass(frozen=True)
class ToolConfig:
    """How the simulated tool I/O behaves. Rates are probabilities per call."""

    latency_s: float = 0.02
    jitter: float = 0.5  # latency varies uniformly by +/- this fraction
    failure_rate: float = 0.0
    timeout_rate: float = 0.0
    hang_s: float = 30.0  # how long a call that times out hangs (the caller's timeout should cut it)
    search_k: int = 5
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("failure_rate", "timeout_rate"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"ToolConfig.{name} must be within [0, 1], got {getattr(self, name)}")
        for name in ("latency_s", "jitter", "hang_s"):
            if getattr(self, name) < 0:
                raise ValueError(f"ToolConfig.{name} must be >= 0, got {getattr(self, name)}")
        if self.search_k < 1:
            raise ValueError(f"ToolConfig.search_k must be >= 1, got {self.search_k}")


class ResearchTools:
    """``search`` and ``fetch`` as the model sees them: plain text results, simulated I/O."""

    def __init__(self, corpus: Corpus, config: ToolConfig | None = None) -> None:
        self.corpus = corpus
        self.config = config or ToolConfig()
        self._rng = random.Random(self.config.seed)

    async def search(self, query: str) -> str:
        """A JSON list of ``{"id", "title", "snippet"}``; the model fetches by that id."""
        await self._io()
        hits = self.corpus.search(query, k=self.config.search_k)
        return json.dumps([{"id": h.doc_id, "title": h.title, "snippet": h.snippet} for h in hits])

    async def fetch(self, doc_id: str) -> str:
        """The document as JSON ``{"id", "title", "text"}``."""
        await self._io()
        doc = self.corpus.get(doc_id)
        return json.dumps({"id": doc.id, "title": doc.title, "text": doc.text})

    async def _io(self) -> None:
        """Wait like a network call would, then maybe fail or time out."""
        cfg = self.config
        roll = self._rng.random()
        await asyncio.sleep(cfg.latency_s * (1 + cfg.jitter * (2 * self._rng.random() - 1)))
        if roll < cfg.timeout_rate:
            await asyncio.sleep(cfg.hang_s)
            raise ToolTimeout(f"tool call hung for {cfg.hang_s:.2f}s (simulated)")
        if roll < cfg.timeout_rate + cfg.failure_rate:
            raise ToolFailure("tool backend answered 503 (simulated failure)")


class ToolCache:
    """A bounded LRU of tool results keyed by tool name and arguments; shared across runs."""

    def __init__(self, max_entries: int = 4096) -> None:
        self._entries: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._max = max_entries
        self.hits = 0
        self.misses = 0

    def get(self, tool: str, argument: str) -> str | None:
        key = (tool, argument.strip().lower())
        result = self._entries.get(key)
        if result is None:
            self.misses += 1
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return result

    def put(self, tool: str, argument: str, result: str) -> None:
        key = (tool, argument.strip().lower())
        self._entries[key] = result
        self._entries.move_to_end(key)
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)
