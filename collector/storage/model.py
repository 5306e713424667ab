"""The normalised span row: what ingestion produces and every store writes.

One row per span, whatever dialect it arrived in (GenAI conventions, OpenInference,
OpenLLMetry, vLLM). Missing numbers are 0 (tokens, cost) or None (latencies that were
not measured), so aggregates never mix "unknown" with "zero".
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class SpanRow:
    project: str
    trace_id: str  # 32 lowercase hex chars
    span_id: str  # 16 lowercase hex chars
    parent_span_id: str  # "" for a root span
    name: str
    kind: str  # run | step | llm | tool | retrieval | other (agentwatch.semconv.SPAN_KINDS)
    start_time_ns: int
    end_time_ns: int
    service_name: str = ""
    status_code: str = "unset"  # unset | ok | error
    status_message: str = ""
    error_type: str = ""
    is_timeout: bool = False
    agent_name: str = ""  # gen_ai.agent.name of the run (propagated to children by the SDK)
    session_id: str = ""
    user_id: str = ""
    model: str = ""  # response model if known, else request model
    provider: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float = 0.0
    price_version: str = ""
    ttft_s: float | None = None
    tpot_s: float | None = None
    queue_s: float | None = None  # engine spans (vLLM): time in queue
    prefill_s: float | None = None
    decode_s: float | None = None
    tool_name: str = ""
    tool_cache_hit: bool = False
    step_index: int = -1
    finish_reason: str = ""
    outcome: str = ""  # run spans: success | failure | abandoned | refused (no run: docs/runs.md "Outcomes")
    budget_exceeded: str = ""  # run spans: cost | steps | seconds
    request_id: str = ""  # engine request id
    input_text: str = ""  # captured content (redacted), empty when not captured
    output_text: str = ""
    attributes: dict[str, str] = field(default_factory=dict)  # everything not mapped above
    resource: dict[str, str] = field(default_factory=dict)
    events: str = ""  # JSON list of span events (exceptions keep type, message, stack)
    # The agent's version: the span's own service.version (an SDK run that names its version), else
    # its resource's. Last, so a spans table spilled before the column existed is this one less it.
    service_version: str = ""

    @property
    def duration_s(self) -> float:
        return max(0, self.end_time_ns - self.start_time_ns) / 1e9
