"""Prometheus metrics of the simulated engine, under vLLM's own names and labels.

A scraper written for vLLM (the collector's) reads them unchanged: gauges
``vllm:num_requests_running``, ``vllm:num_requests_waiting``, ``vllm:kv_cache_usage_perc``;
counters exposed as ``vllm:prefix_cache_queries_total``, ``vllm:prefix_cache_hits_total``
(in tokens), ``vllm:num_preemptions_total``, ``vllm:prompt_tokens_total``,
``vllm:generation_tokens_total``, ``vllm:request_success_total``; histograms
``vllm:time_to_first_token_seconds``, ``vllm:inter_token_latency_seconds``,
``vllm:e2e_request_latency_seconds``, ``vllm:request_queue_time_seconds``, with vLLM's bucket
boundaries. Labels are vLLM v1's ``model_name`` and ``engine``. Each server has its own
registry, so two engines in one process (tests) never share series.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

LABELS = ("model_name", "engine")
SIM = " (simulated engine)"
TTFT_BUCKETS = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
)
ITL_BUCKETS = (
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
)
REQUEST_BUCKETS = (
    0.3,
    0.5,
    0.8,
    1.0,
    1.5,
    2.0,
    2.5,
    5.0,
    10.0,
    15.0,
    20.0,
    30.0,
    40.0,
    50.0,
    60.0,
    120.0,
    240.0,
    480.0,
    960.0,
    1920.0,
    7680.0,
)


class EngineMetrics:
    """All series of one engine server, in one registry."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        reg = self.registry
        self.running = Gauge(
            "vllm:num_requests_running", "Number of requests in model execution batches." + SIM, LABELS, registry=reg
        )
        self.waiting = Gauge(
            "vllm:num_requests_waiting", "Number of requests waiting to be processed." + SIM, LABELS, registry=reg
        )
        self.kv_usage = Gauge(
            "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage." + SIM, LABELS, registry=reg
        )
        self.prefix_queries = Counter(
            "vllm:prefix_cache_queries",
            "Prefix cache queries, in terms of number of queried tokens." + SIM,
            LABELS,
            registry=reg,
        )
        self.prefix_hits = Counter(
            "vllm:prefix_cache_hits",
            "Prefix cache hits, in terms of number of cached tokens." + SIM,
            LABELS,
            registry=reg,
        )
        self.preemptions = Counter(
            "vllm:num_preemptions", "Cumulative number of preemption from the engine." + SIM, LABELS, registry=reg
        )
        self.prompt_tokens = Counter(
            "vllm:prompt_tokens", "Number of prefill tokens processed." + SIM, LABELS, registry=reg
        )
        self.generation_tokens = Counter(
            "vllm:generation_tokens", "Number of generation tokens processed." + SIM, LABELS, registry=reg
        )
        self.request_success = Counter(
            "vllm:request_success",
            "Count of successfully processed requests." + SIM,
            (*LABELS, "finished_reason"),
            registry=reg,
        )
        self.ttft = Histogram(
            "vllm:time_to_first_token_seconds",
            "Histogram of time to first token in seconds." + SIM,
            LABELS,
            buckets=TTFT_BUCKETS,
            registry=reg,
        )
        self.itl = Histogram(
            "vllm:inter_token_latency_seconds",
            "Histogram of inter-token latency in seconds." + SIM,
            LABELS,
            buckets=ITL_BUCKETS,
            registry=reg,
        )
        self.e2e = Histogram(
            "vllm:e2e_request_latency_seconds",
            "Histogram of e2e request latency in seconds." + SIM,
            LABELS,
            buckets=REQUEST_BUCKETS,
            registry=reg,
        )
        self.queue = Histogram(
            "vllm:request_queue_time_seconds",
            "Histogram of time spent in WAITING phase for request." + SIM,
            LABELS,
            buckets=REQUEST_BUCKETS,
            registry=reg,
        )

    def for_model(self, model_name: str, engine: str = "0") -> ModelMetrics:
        """The children of every series for one served model."""
        return ModelMetrics(self, model_name, engine)


class ModelMetrics:
    """Label-bound children for one model, so the engine loop updates them cheaply."""

    def __init__(self, metrics: EngineMetrics, model_name: str, engine: str) -> None:
        labels = {"model_name": model_name, "engine": engine}
        self._metrics = metrics
        self._labels = labels
        self.running = metrics.running.labels(**labels)
        self.waiting = metrics.waiting.labels(**labels)
        self.kv_usage = metrics.kv_usage.labels(**labels)
        self.prefix_queries = metrics.prefix_queries.labels(**labels)
        self.prefix_hits = metrics.prefix_hits.labels(**labels)
        self.preemptions = metrics.preemptions.labels(**labels)
        self.prompt_tokens = metrics.prompt_tokens.labels(**labels)
        self.generation_tokens = metrics.generation_tokens.labels(**labels)
        self.ttft = metrics.ttft.labels(**labels)
        self.itl = metrics.itl.labels(**labels)
        self.e2e = metrics.e2e.labels(**labels)
        self.queue = metrics.queue.labels(**labels)

    def success(self, finished_reason: str) -> None:
        self._metrics.request_success.labels(**self._labels, finished_reason=finished_reason).inc()
