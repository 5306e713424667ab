"""The collector's settings: one object, read from arguments, then ``AGENTWATCH_*``, then defaults.

Every variable is documented here; docs/configuration.md's table lists ``Settings.describe()``
and each plugin's (``collector.plugins.Plugin.settings``: a part that runs inside the collector
brings its own, an ``EnvSettings`` too, such as the alerts' ``alerts.settings``;
tests/test_readme.py holds the page to them). Values are read by ``agentwatch.envconfig``, as
the SDK's and the dashboard's are; a bad environment value raises ``ValueError`` naming the
variable.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Self

from agentwatch.envconfig import ENV_PREFIX, env_value


class EnvSettings:
    """A dataclass of settings whose every field names its variable and says what it does
    (``metadata={"env": ..., "doc": ...}``): read by ``from_env``, listed by ``describe``."""

    @classmethod
    def from_env(cls, **overrides: object) -> Self:
        """Arguments win over the environment, which wins over the defaults. A bad variable raises
        ``agentwatch.envconfig.EnvError`` (a ``ValueError``) naming it: the collector does not start."""
        values: dict[str, object] = {}
        for f in fields(cls):  # type: ignore[arg-type]
            if overrides.get(f.name) is not None:
                values[f.name] = overrides[f.name]
            else:
                check = functools.partial(_check_number, f.name)
                values[f.name] = env_value(ENV_PREFIX + f.metadata["env"], f.default, check=check, empty_is_unset=False)
        return cls(**values)

    @classmethod
    def describe(cls) -> list[tuple[str, str, str]]:
        return [(ENV_PREFIX + f.metadata["env"], str(f.default), f.metadata["doc"]) for f in fields(cls)]  # type: ignore[arg-type]


@dataclass
class Settings(EnvSettings):
    host: str = field(default="127.0.0.1", metadata={"env": "HOST", "doc": "address the collector binds"})
    port: int = field(default=4318, metadata={"env": "PORT", "doc": "OTLP/HTTP and query API port"})
    grpc_port: int = field(default=4317, metadata={"env": "GRPC_PORT", "doc": "OTLP/gRPC port (0 disables)"})
    data_dir: Path = field(
        default=Path(".agentwatch"), metadata={"env": "DATA_DIR", "doc": "chDB data, spool and key files"}
    )
    clickhouse_url: str = field(
        default="",
        metadata={
            "env": "CLICKHOUSE_URL",
            "doc": "ClickHouse server URL (http://user:pass@host:8123/db); empty = embedded chDB",
        },
    )
    clickhouse_cluster: str = field(
        default="",
        metadata={
            "env": "CLICKHOUSE_CLUSTER",
            "doc": "ClickHouse cluster name (remote_servers): sharded, replicated DDL with ON CLUSTER; empty = one server",
        },
    )
    collector_id: str = field(
        default="",
        metadata={
            "env": "COLLECTOR_ID",
            "doc": "this collector's name in leases and logs (a random suffix is added per process); empty = host-pid",
        },
    )
    lease_ttl_s: float = field(
        default=15.0,
        metadata={
            "env": "LEASE_TTL_S",
            "doc": "with a ClickHouse server: how long a collector's lease on a once-per-cluster role (alerts, engine scraping, engine-join billing, run closing) outlives its last renewal",
        },
    )
    max_body_bytes: int = field(
        default=16 * 1024 * 1024,
        metadata={"env": "MAX_BODY_BYTES", "doc": "largest accepted request body, after decompression"},
    )
    max_spans_per_request: int = field(
        default=50_000, metadata={"env": "MAX_SPANS_PER_REQUEST", "doc": "spans accepted per export request"}
    )
    max_attribute_length: int = field(
        default=32_768,
        metadata={"env": "MAX_ATTRIBUTE_LENGTH", "doc": "longer attribute values are truncated with a marker"},
    )
    max_attribute_key_length: int = field(
        default=256,
        metadata={
            "env": "MAX_ATTRIBUTE_KEY_LENGTH",
            "doc": "longer attribute names (span, event, resource) are cut with a marker and a partial_success warning",
        },
    )
    max_attributes_per_span: int = field(
        default=1024,
        metadata={
            "env": "MAX_ATTRIBUTES_PER_SPAN",
            "doc": "attributes kept per span beyond the mapped ones (and per resource); the rest are dropped with a partial_success warning",
        },
    )
    max_events_per_span: int = field(
        default=1024,
        metadata={
            "env": "MAX_EVENTS_PER_SPAN",
            "doc": "events kept per span (the first ones); the rest are dropped with a partial_success warning",
        },
    )
    max_resource_bytes_per_request: int = field(
        default=256 * 1024 * 1024,
        metadata={
            "env": "MAX_RESOURCE_BYTES_PER_REQUEST",
            "doc": "resource attributes a request stores, counted once per span (UTF-8 bytes); beyond it 413 (a large resource over many small spans would multiply the body in memory)",
        },
    )
    max_attributes_per_event: int = field(
        default=128,
        metadata={
            "env": "MAX_ATTRIBUTES_PER_EVENT",
            "doc": "attributes kept per span event; the rest are dropped with a partial_success warning",
        },
    )
    native_decode: bool = field(
        default=True,
        metadata={
            "env": "NATIVE_DECODE",
            "doc": "decode OTLP protobuf with the built-in C decoder (false: the Python path, same results, ~3x the CPU)",
        },
    )
    decode_threads: int = field(
        default=1,
        metadata={
            "env": "DECODE_THREADS",
            "doc": "threads decoding request bodies over 32 KiB (smaller ones are decoded on the event loop). The decoders hold Python's GIL, so a second thread added no spans/s on 2 cores but 13-26 MB to the peak of a burst with captured text (another C heap and more requests decoded at once, bench/results/scale.md). Raise it where gzip bodies dominate: inflating them releases the GIL",
        },
    )
    flush_rows: int = field(
        default=20_000, metadata={"env": "FLUSH_ROWS", "doc": "insert when this many spans are queued"}
    )
    flush_interval_s: float = field(
        default=0.5,
        metadata={
            "env": "FLUSH_INTERVAL_S",
            "doc": "longest spans wait for others to share their insert, counted from the oldest one's arrival or the last insert, whichever is sooner: an idle collector inserts a span as it comes, a busy one at most an insert an interval beyond those that fill FLUSH_ROWS",
        },
    )
    max_queue_spans: int = field(
        default=500_000, metadata={"env": "MAX_QUEUE_SPANS", "doc": "in-memory queue bound; beyond it 429/503"}
    )
    max_queue_bytes: int = field(
        default=128 * 1024 * 1024,
        metadata={
            "env": "MAX_QUEUE_BYTES",
            "doc": "bytes of decoded spans kept in memory until inserted (a batch takes at most half); beyond it they wait on disk, decoded, in <data dir>/spill (memory-mapped back at insert, not the collector's anonymous memory). An embedded store's spans wait without their captured texts (written to its text files as they are decoded), so the bound is in text-free bytes there; a ClickHouse-backed collector queues the texts too, and the bound is what keeps large prompts from growing its memory. A 600k-span burst with captured text on embedded chDB peaked at 240-254 MB anonymous with 128 MiB, 32 MiB, 16 MiB or no bound (bench/results/scale.md); 16 MiB cost ~25 % of the spans/s without captured text (smaller inserts). 0: no bound in bytes (the queue is bounded in spans only)",
        },
    )
    chdb_cache_bytes: int = field(
        default=64 * 1024 * 1024,
        metadata={
            "env": "CHDB_CACHE_BYTES",
            "doc": "embedded chDB: the size of each of its caches (marks, primary index, secondary-index marks, query conditions); ClickHouse's server defaults are 5 GiB each. 0 turns them off",
        },
    )
    chdb_memory_limit_bytes: int = field(
        default=0,
        metadata={
            "env": "CHDB_MEMORY_LIMIT_BYTES",
            "doc": "embedded chDB: memory its statements may hold together (max_server_memory_usage); past it a statement fails instead of the process growing: a batch of spans over it is inserted in halves, as small as it takes (a batch retried whole never got in: ingestion stalled). 0: ClickHouse's default, 90 % of RAM",
        },
    )
    chdb_dirty_decay_ms: int = field(
        default=1000,
        metadata={
            "env": "CHDB_DIRTY_DECAY_MS",
            "doc": "embedded chDB: how long its allocator (jemalloc) keeps freed pages before returning them to the OS; chDB's own 5000 kept 150-300 MB more in a burst (bench/results/scale.md); 0 made every query fault its pages in again (1.7x the CPU of the 24 h overview). Ignored when JE_MALLOC_CONF is set",
        },
    )
    chdb_allocator_arenas: int = field(
        default=1,
        metadata={
            "env": "CHDB_ALLOCATOR_ARENAS",
            "doc": "embedded chDB: the arenas its allocator (jemalloc) spreads allocations over (percpu_arena:disabled,narenas:N); ClickHouse's default is one per CPU, where pages an insert frees in one arena are not reused by the next statement running in another: one arena took the peak of an 8 MB insert from 35-60 to 30-40 MB and a burst's peak 7-24 MB lower in six alternating pairs (bench/results/scale.md). 0: one per CPU. Ignored when JE_MALLOC_CONF is set",
        },
    )
    chdb_merge_threads: int = field(
        default=2,
        metadata={
            "env": "CHDB_MERGE_THREADS",
            "doc": "embedded chDB: threads merging parts in the background (background_pool_size; each merge holds blocks of its parts in memory); 0: ClickHouse's default, 16. Raise it on a large machine if /metrics shows parts piling up",
        },
    )
    chdb_merge_hold_s: float = field(
        default=30.0,
        metadata={
            "env": "CHDB_MERGE_HOLD_S",
            "doc": "embedded chDB, with a bound in bytes (MAX_QUEUE_BYTES, on by default): while more than FLUSH_ROWS spans wait behind the batch being inserted (a burst), the spans table's background merges wait, for at most this long, and catch up once the queue is drained; merging while inserting added 60-140 MB to the peak of a burst with captured text (64 MiB bound 506 -> 439 MB, 32 MiB 476 -> 340 MB, bench/results/scale.md). Without a bound in bytes merges never wait (the batches, and the peak, would grow instead). 0: merges never wait",
        },
    )
    malloc_mmap_threshold_bytes: int = field(
        default=0,
        metadata={
            "env": "MALLOC_MMAP_THRESHOLD_BYTES",
            "doc": "glibc: fix malloc's mmap threshold so that buffers above it are returned to the OS when freed instead of fragmenting the heap. With captured texts kept out of chDB (an embedded store), 524288 took a 600k-span burst with text from ~255-270 to 241-258 MB anonymous at its peak (ten runs, median 246; bench/results/scale.md), for ~6 % of that burst's spans/s and ~12 % of bench.ingest's HTTP rate with text (page faults of the buffers mapped anew); since the decoding thread trims the heap itself (every 8th body) it no longer lowers the peak (242 against 238-248 MB) and still costs ~10 % of the burst's spans/s; 262144 cost ~10 % with text before. 0 leaves glibc's dynamic threshold",
        },
    )
    collector_pandas: bool = field(
        default=False,
        metadata={
            "env": "COLLECTOR_PANDAS",
            "doc": "let pandas load in the collector process; the collector never builds data frames, and pyarrow loads pandas (~30 MB of the collector's anonymous memory, idle and at every peak) on its first array built from Python values. Set it for a plugin that imports pandas",
        },
    )
    spool_max_bytes: int = field(
        default=1024**3, metadata={"env": "SPOOL_MAX_BYTES", "doc": "on-disk spool bound while the store is down"}
    )
    retention_days: int = field(
        default=30,
        metadata={
            "env": "RETENTION_DAYS",
            "doc": "days kept of spans, rollups, texts, feedback and engine metrics (0 keeps them forever)",
        },
    )
    require_auth: bool = field(
        default=True, metadata={"env": "REQUIRE_AUTH", "doc": "require a project API key on every endpoint"}
    )
    rate_limit_spans_per_s: float = field(
        default=200_000.0, metadata={"env": "RATE_LIMIT_SPANS_PER_S", "doc": "per-key ingestion rate limit"}
    )
    scrape_targets: str = field(
        default="", metadata={"env": "SCRAPE_TARGETS", "doc": "engine /metrics to scrape: name=url,name=url"}
    )
    scrape_interval_s: float = field(default=5.0, metadata={"env": "SCRAPE_INTERVAL_S", "doc": "engine scrape period"})
    scrape_allowed_hosts: str = field(
        default="",
        metadata={
            "env": "SCRAPE_ALLOWED_HOSTS",
            "doc": "hosts engines may be registered at beyond loopback: names, IPs or CIDRs, comma-separated (link-local and metadata addresses are always refused)",
        },
    )
    scrape_max_bytes: int = field(
        default=4 * 1024 * 1024,
        metadata={
            "env": "SCRAPE_MAX_BYTES",
            "doc": "largest engine /metrics response read; a larger one is cut off and the scrape fails",
        },
    )
    max_engines_per_project: int = field(
        default=16, metadata={"env": "MAX_ENGINES_PER_PROJECT", "doc": "engines a project may register through the API"}
    )
    body_read_timeout_s: float = field(
        default=10.0,
        metadata={
            "env": "BODY_READ_TIMEOUT_S",
            "doc": "a request body that sends nothing for this long gets 408 and its connection is closed (0 disables)",
        },
    )
    header_read_timeout_s: float = field(
        default=10.0,
        metadata={
            "env": "HEADER_READ_TIMEOUT_S",
            "doc": "a request line and headers not complete this long after the connection opened (or the previous response) get 408 and the connection is closed (0 disables)",
        },
    )
    run_idle_timeout_s: float = field(
        default=300.0,
        metadata={
            "env": "RUN_IDLE_TIMEOUT_S",
            "doc": "a run whose root span has not arrived is 'running' while a span arrived this recently, then 'incomplete'",
        },
    )
    engine_join_wait_s: float = field(
        default=30.0,
        metadata={
            "env": "ENGINE_JOIN_WAIT_S",
            "doc": "how long an engine span waits for the client LLM span that records the same call before it is counted as an engine-only call",
        },
    )
    prices_file: str = field(
        default="",
        metadata={"env": "PRICES_FILE", "doc": "price overrides (JSON/YAML), also self-hosted GPU-hour prices"},
    )
    gpu_sampler: str = field(
        default="auto",
        metadata={
            "env": "GPU_SAMPLER",
            "doc": "NVML GPU sampling: 'auto' (the first scrape target's engine and project, else local@default), 'off', or ENGINE@PROJECT",
        },
    )
    gpu_hour_usd: float = field(
        default=0.0, metadata={"env": "GPU_HOUR_USD", "doc": "price of one GPU-hour for self-hosted cost"}
    )
    redact_patterns: str = field(
        default="default",
        metadata={
            "env": "REDACT_PATTERNS",
            "doc": "collector-side redaction: 'default', 'none', or extra regexes separated by ';;'",
        },
    )
    cors_origins: str = field(
        default="", metadata={"env": "CORS_ORIGINS", "doc": "comma-separated allowed origins; empty = no CORS"}
    )


def _check_number(name: str, value: object) -> None:
    """Every numeric setting is a size, a count, a duration, a price or a port: finite, >= 0."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return
    if not math.isfinite(value) or value < 0:
        raise ValueError("must be a finite number >= 0")
    if name.endswith("port") and value > 65535:
        raise ValueError("a port must be between 0 and 65535")
