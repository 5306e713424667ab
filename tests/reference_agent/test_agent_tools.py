"""The research agent's corpus and tools: deterministic, searchable, failing as configured."""

from __future__ import annotations

import asyncio
import gzip
import json

import pytest

from agentwatch_platform.reference_agent.corpus.build import CORPUS_PATH, build_documents
from agentwatch_platform.reference_agent.tools import (
    Corpus,
    ResearchTools,
    ToolCache,
    ToolConfig,
    ToolFailure,
    ToolTimeout,
    UnknownDocument,
)


def test_bundled_corpus_is_the_seeded_build() -> None:
    with gzip.open(CORPUS_PATH, "rt") as fh:
        stored = [json.loads(line) for line in fh]
    assert stored == build_documents()
    assert 300 <= len(stored) <= 500
    assert CORPUS_PATH.stat().st_size < 1_000_000


def test_search_ranks_documents_about_the_query_first() -> None:
    corpus = Corpus.load()
    hits = corpus.search("continuous batching queue time", k=5)
    assert len(hits) == 5
    assert all(hit.title.lower().startswith("continuous batching") for hit in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert corpus.search("zzzz qqqq") == []


def test_fetch_returns_json_and_rejects_unknown_ids() -> None:
    tools = ResearchTools(Corpus.load(), ToolConfig(latency_s=0.0))
    found = json.loads(asyncio.run(tools.search("raft leader election")))
    document = json.loads(asyncio.run(tools.fetch(found[0]["id"])))
    assert document["id"] == found[0]["id"] and "raft" in document["text"].lower()
    with pytest.raises(UnknownDocument, match="doc-9999"):
        asyncio.run(tools.fetch("doc-9999"))


def test_failure_and_timeout_rates_follow_the_seeded_rng() -> None:
    config = ToolConfig(latency_s=0.0, failure_rate=0.3, timeout_rate=0.2, hang_s=0.0, seed=3)

    async def outcomes() -> list[str]:
        tools, seen = ResearchTools(Corpus.load(), config), []
        for _ in range(400):
            try:
                await tools.search("kv cache")
                seen.append("ok")
            except ToolTimeout:
                seen.append("timeout")
            except ToolFailure:
                seen.append("failure")
        return seen

    first, second = asyncio.run(outcomes()), asyncio.run(outcomes())
    assert first == second
    assert 0.2 < first.count("failure") / 400 < 0.4
    assert 0.12 < first.count("timeout") / 400 < 0.28


@pytest.mark.parametrize("bad", [{"failure_rate": 1.5}, {"timeout_rate": -0.1}, {"latency_s": -1}, {"search_k": 0}])
def test_bad_tool_config_names_the_field(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError, match=next(iter(bad))):
        ToolConfig(**bad)


def test_cache_is_a_bounded_lru_keyed_by_normalised_argument() -> None:
    cache = ToolCache(max_entries=2)
    cache.put("search", "KV cache", "a")
    cache.put("fetch", "doc-0001", "b")
    assert cache.get("search", " kv cache ") == "a"
    cache.put("fetch", "doc-0002", "c")  # evicts the least recently used: fetch doc-0001
    assert cache.get("fetch", "doc-0001") is None
    assert (cache.hits, cache.misses) == (1, 1)


def test_agent_attribute_names_are_the_semantic_conventions() -> None:
    """The agent spells them out (users copy it and import only ``agentwatch``); keep them in sync."""
    from agentwatch import semconv as sc

    from agentwatch_platform.reference_agent import agent

    assert (agent.CACHE_HIT, agent.TOKENS_SAVED, agent.MODEL_TIER) == (
        sc.AW_TOOL_CACHE_HIT,
        sc.AW_TOOL_TOKENS_SAVED,
        sc.AW_MODEL_TIER,
    )
