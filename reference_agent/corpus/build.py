"""Build the bundled research corpus: a few hundred generated technical documents.

The documents are generated, not scraped, so the corpus carries no licence question and
rebuilds byte for byte: a seeded RNG picks a topic, an aspect and sentences from templates
filled with the topic's own terms. Run ``python -m reference_agent.corpus.build`` to rewrite
``corpus.jsonl.gz`` (one JSON object per line: ``id``, ``title``, ``topic``, ``text``).
"""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

SEED = 20240601
DOCS = 360
CORPUS_PATH = Path(__file__).with_name("corpus.jsonl.gz")

# topic -> (field, key terms, a related topic to compare with)
TOPICS: dict[str, tuple[str, tuple[str, ...], str]] = {
    "continuous batching": (
        "LLM serving",
        ("scheduler", "decode step", "slot", "throughput", "queue time"),
        "static batching",
    ),
    "static batching": (
        "LLM serving",
        ("batch", "padding", "head-of-line blocking", "slot", "latency"),
        "continuous batching",
    ),
    "paged attention": (
        "LLM serving",
        ("KV cache", "block table", "fragmentation", "page", "memory"),
        "contiguous KV allocation",
    ),
    "prefix caching": (
        "LLM serving",
        ("shared prefix", "hash", "KV block", "hit rate", "system prompt"),
        "paged attention",
    ),
    "speculative decoding": (
        "LLM serving",
        ("draft model", "acceptance rate", "verification", "tokens per step", "latency"),
        "continuous batching",
    ),
    "KV cache quantization": (
        "LLM serving",
        ("FP8", "precision", "memory bandwidth", "accuracy", "cache size"),
        "paged attention",
    ),
    "tensor parallelism": (
        "distributed inference",
        ("all-reduce", "shard", "GPU", "interconnect", "NVLink"),
        "pipeline parallelism",
    ),
    "pipeline parallelism": (
        "distributed inference",
        ("stage", "micro-batch", "bubble", "GPU", "activation"),
        "tensor parallelism",
    ),
    "time to first token": (
        "LLM performance",
        ("prefill", "queue", "prompt length", "latency", "percentile"),
        "time per output token",
    ),
    "time per output token": (
        "LLM performance",
        ("decode", "memory bandwidth", "batch size", "latency", "streaming"),
        "time to first token",
    ),
    "ReAct agents": (
        "agent design",
        ("reasoning", "action", "observation", "history", "context window"),
        "evolving-report agents",
    ),
    "evolving-report agents": (
        "agent design",
        ("report", "bounded context", "summary", "step", "memory"),
        "ReAct agents",
    ),
    "tool calling": (
        "agent design",
        ("function schema", "arguments", "JSON", "tool result", "parser"),
        "structured output",
    ),
    "structured output": (
        "agent design",
        ("JSON schema", "grammar", "constrained decoding", "validation", "parser"),
        "tool calling",
    ),
    "model routing": ("cost control", ("small model", "large model", "router", "difficulty", "cost"), "prompt caching"),
    "prompt caching": ("cost control", ("cached tokens", "discount", "prefix", "hit rate", "cost"), "model routing"),
    "token budgets": ("cost control", ("budget", "limit", "runaway", "step count", "cost"), "rate limiting"),
    "rate limiting": ("reliability", ("token bucket", "quota", "429", "burst", "fairness"), "load shedding"),
    "load shedding": ("reliability", ("overload", "priority", "queue", "503", "degradation"), "rate limiting"),
    "retries with backoff": (
        "reliability",
        ("exponential backoff", "jitter", "idempotency", "timeout", "retry budget"),
        "circuit breakers",
    ),
    "circuit breakers": (
        "reliability",
        ("open state", "half-open", "failure rate", "fallback", "timeout"),
        "retries with backoff",
    ),
    "distributed tracing": (
        "observability",
        ("span", "trace", "context propagation", "traceparent", "sampling"),
        "structured logging",
    ),
    "structured logging": (
        "observability",
        ("log record", "field", "JSON", "correlation id", "index"),
        "distributed tracing",
    ),
    "OpenTelemetry": (
        "observability",
        ("OTLP", "exporter", "span processor", "resource", "semantic conventions"),
        "distributed tracing",
    ),
    "Prometheus metrics": (
        "observability",
        ("counter", "histogram", "label", "scrape", "cardinality"),
        "OpenTelemetry",
    ),
    "anomaly detection": (
        "observability",
        ("baseline", "seasonality", "drift", "threshold", "false positive"),
        "static thresholds",
    ),
    "static thresholds": (
        "observability",
        ("threshold", "alert", "noise", "tuning", "false positive"),
        "anomaly detection",
    ),
    "columnar storage": (
        "databases",
        ("column", "compression", "vectorized execution", "scan", "granule"),
        "row storage",
    ),
    "row storage": ("databases", ("row", "page", "index", "update", "transaction"), "columnar storage"),
    "ClickHouse MergeTree": ("databases", ("part", "merge", "primary key", "granule", "partition"), "columnar storage"),
    "B-tree indexes": ("databases", ("node", "fan-out", "page", "range scan", "split"), "LSM trees"),
    "LSM trees": (
        "databases",
        ("memtable", "SSTable", "compaction", "write amplification", "bloom filter"),
        "B-tree indexes",
    ),
    "write-ahead logging": ("databases", ("log", "fsync", "durability", "recovery", "checkpoint"), "LSM trees"),
    "idempotent ingestion": (
        "data pipelines",
        ("deduplication", "token", "retry", "exactly once", "key"),
        "write-ahead logging",
    ),
    "Raft consensus": ("distributed systems", ("leader", "term", "log replication", "quorum", "election"), "Paxos"),
    "Paxos": ("distributed systems", ("proposer", "acceptor", "ballot", "quorum", "learner"), "Raft consensus"),
    "consistent hashing": (
        "distributed systems",
        ("ring", "virtual node", "rebalancing", "key", "shard"),
        "rendezvous hashing",
    ),
    "rendezvous hashing": (
        "distributed systems",
        ("weight", "hash", "node", "key", "minimal disruption"),
        "consistent hashing",
    ),
    "vector search": ("retrieval", ("embedding", "nearest neighbour", "HNSW", "recall", "index"), "BM25 ranking"),
    "BM25 ranking": (
        "retrieval",
        ("term frequency", "inverse document frequency", "length normalisation", "query", "score"),
        "vector search",
    ),
    "retrieval-augmented generation": (
        "retrieval",
        ("retriever", "chunk", "context", "grounding", "citation"),
        "vector search",
    ),
    "document chunking": (
        "retrieval",
        ("chunk size", "overlap", "boundary", "context", "recall"),
        "retrieval-augmented generation",
    ),
    "GPU memory bandwidth": (
        "hardware",
        ("HBM", "bandwidth", "roofline", "arithmetic intensity", "decode"),
        "GPU compute throughput",
    ),
    "GPU compute throughput": (
        "hardware",
        ("tensor core", "FLOPS", "matrix multiply", "utilisation", "prefill"),
        "GPU memory bandwidth",
    ),
    "mixed precision": ("hardware", ("FP16", "BF16", "FP8", "loss scaling", "accuracy"), "KV cache quantization"),
    "async I/O in Python": (
        "software",
        ("event loop", "coroutine", "await", "concurrency", "backpressure"),
        "thread pools",
    ),
    "thread pools": ("software", ("worker", "queue", "GIL", "blocking call", "concurrency"), "async I/O in Python"),
    "bounded queues": ("software", ("capacity", "drop", "backpressure", "producer", "consumer"), "load shedding"),
    "HTTP keep-alive": ("networking", ("connection", "pool", "latency", "handshake", "reuse"), "gRPC streaming"),
    "gRPC streaming": ("networking", ("stream", "HTTP/2", "flow control", "message", "deadline"), "HTTP keep-alive"),
}

ASPECTS = (
    "overview",
    "performance",
    "failure modes",
    "configuration",
    "cost",
    "history",
    "comparison",
    "best practices",
)

SENTENCES: dict[str, tuple[str, ...]] = {
    "overview": (
        "{Topic} is a technique in {field} built around the {t0} and the {t1}.",
        "In practice {topic} matters whenever the {t2} becomes the limiting factor.",
        "Most implementations of {topic} expose the {t3} as a first-class concept.",
        "Engineers reach for {topic} when the {t4} must be predictable under load.",
    ),
    "performance": (
        "Benchmarks of {topic} report that the {t0} dominates latency at high load.",
        "Throughput of {topic} improves by roughly {n}% when the {t1} is tuned.",
        "The p95 latency of {topic} is sensitive to the {t2} more than to the {t3}.",
        "Profiling {topic} usually shows the {t4} as the hottest path.",
    ),
    "failure modes": (
        "A common failure of {topic} is an exhausted {t0}, which shows up as rising queue time.",
        "When the {t1} misbehaves, {topic} degrades gracefully only if timeouts are set.",
        "Operators of {topic} watch the {t2} because it degrades silently long before users notice.",
        "Retries hide problems in {topic} until the {t3} saturates.",
    ),
    "configuration": (
        "The main knob of {topic} is the size of the {t0}; a default of {n} works for most loads.",
        "Setting the {t1} too low makes {topic} spend its time on the {t2}.",
        "Production deployments of {topic} pin the {t3} explicitly rather than trusting defaults.",
        "Changing the {t4} of {topic} requires a restart in most systems.",
    ),
    "cost": (
        "The cost of {topic} scales with the {t0}, so teams track it per request.",
        "Caching the {t1} cuts the cost of {topic} by about {n}% in published reports.",
        "{Topic} trades {t2} for {t3}, which changes the bill more than the latency.",
        "Budgets on the {t4} keep {topic} from running away.",
    ),
    "history": (
        "{Topic} appeared around {year} as an answer to problems with the {t0}.",
        "Early versions of {topic} ignored the {t1}; later ones made it central.",
        "The idea behind {topic} was refined in the {field} community after {year}.",
        "Open-source projects popularised {topic} by documenting the {t2} in detail.",
    ),
    "comparison": (
        "Compared with {other}, {topic} handles the {t0} differently.",
        "{Other} wins when the {t1} is small; {topic} wins when it is large.",
        "Both {topic} and {other} depend on the {t2}, but only {topic} exposes it.",
        "Teams migrating from {other} to {topic} report fewer problems with the {t3}.",
    ),
    "best practices": (
        "Measure the {t0} of {topic} before tuning anything else.",
        "Keep the {t1} bounded so that {topic} stays predictable.",
        "Alert on the {t2} of {topic}, not only on outright outages.",
        "Document the {t3} choice so the next operator of {topic} understands it.",
    ),
}


def _fill(template: str, topic: str, info: tuple[str, tuple[str, ...], str], rng: random.Random) -> str:
    field, terms, other = info
    shuffled = rng.sample(terms, k=len(terms))
    values: dict[str, object] = {f"t{i}": term for i, term in enumerate(shuffled)}
    values.update(
        topic=topic,
        Topic=topic[0].upper() + topic[1:],
        field=field,
        other=other,
        Other=other[0].upper() + other[1:],
        n=rng.randint(8, 60),
        year=rng.randint(2009, 2023),
    )
    return template.format(**values)


def _document(index: int, rng: random.Random) -> dict[str, str]:
    topic = rng.choice(sorted(TOPICS))
    aspect = rng.choice(ASPECTS)
    info = TOPICS[topic]
    paragraphs = []
    for _ in range(rng.randint(2, 4)):
        chosen = list(dict.fromkeys([*SENTENCES[aspect], *SENTENCES[rng.choice(ASPECTS)]]))
        sentences = [_fill(t, topic, info, rng) for t in rng.sample(chosen, k=min(len(chosen), rng.randint(3, 6)))]
        paragraphs.append(" ".join(sentences))
    return {
        "id": f"doc-{index:04d}",
        "title": f"{topic[0].upper() + topic[1:]}: {aspect}",
        "topic": topic,
        "text": "\n\n".join(paragraphs),
    }


def build_documents(count: int = DOCS, seed: int = SEED) -> list[dict[str, str]]:
    """The same documents for the same seed, on any machine."""
    rng = random.Random(seed)
    return [_document(i, rng) for i in range(count)]


def write_corpus(path: Path = CORPUS_PATH) -> Path:
    lines = "".join(json.dumps(doc, sort_keys=True) + "\n" for doc in build_documents())
    with gzip.GzipFile(filename=path, mode="wb", mtime=0) as fh:
        fh.write(lines.encode())
    return path


if __name__ == "__main__":
    written = write_corpus()
    print(f"wrote {written} ({written.stat().st_size} bytes, {DOCS} documents)")
