"""Typed request and response models of the query API: the wire contract.

The collector answers with them and its clients (``agentwatch_api.client``, the dashboard, the
alerts) read them; both sides import this module, which imports no part of the platform.

Endpoints (all under the project of the caller's key, ``Authorization: Bearer <key>``;
times are RFC 3339 strings or epoch seconds; ``start``/``end`` default to the last hour):

- ``GET  /api/runs`` -> ``RunsPage``  start, end and ``RunFilters``: agent, model, status
  (ok|error|timeout|budget|running|incomplete), outcome (success|failure|abandoned|refused: refused
  requests, turned away before any work, are no runs and are listed only with outcome=refused),
  user_id, session_id, tool_failed,
  search, min_cost, max_cost, min_steps, max_steps; sort (any ``RunSummary`` column,
  prefix ``-`` for descending, default ``-start_time``; runs without a feedback score sort last); limit (<= 500), offset.
- ``GET  /api/runs/{trace_id}`` -> ``RunDetail`` (404 when not in the caller's project)
- ``POST /api/runs/{trace_id}/feedback`` body ``FeedbackIn`` -> ``FeedbackOut``
- ``GET  /api/overview`` -> ``Overview``  (start, end, agent, model): headline figures for the
  range and for the previous range of equal length.
- ``GET  /api/timeseries`` -> ``TimeSeries``  (metric, start, end, step_s, group_by=none|agent|model,
  agent, model); metric is one of ``TIMESERIES_METRICS``.
- ``GET  /api/timeseries/set`` -> ``list[TimeSeries]``  the same with ``metric`` repeated (up to all of
  ``TIMESERIES_METRICS``): one request, and one query per kind of figure, for many series.
- ``GET  /api/cost`` -> ``CostBreakdown``  (start, end, agent, model, gpu_hour_usd)
- ``GET  /api/engines`` -> ``list[EngineInfo]``; ``GET /api/engine/metrics`` -> ``EngineSeries``
  (engine, start, end, step_s)
- ``GET  /api/alerts`` -> ``list[AlertOut]`` (state=firing|resolved, start, end, limit);
  ``GET /api/alerts/rules`` -> ``list[AlertRuleOut]``
- the out-of-process evaluator's (``agentwatch alerts run``): ``GET /api/alerts/context`` ->
  ``AlertContext``; ``GET /api/alerts/run-states`` -> ``RunStates``; ``GET /api/alerts/scope-series``
  -> ``TimeSeries``; ``POST /api/alerts`` body ``list[AlertIn]``; ``GET|POST /api/alerts/deliveries``
  ``list[DeliveryOut]`` | body ``list[DeliveryIn]``
- ``GET  /api/filters`` -> ``FilterValues`` (agents and models seen in the range, the caller's project)
- ``GET  /api/spans`` -> ``SpansPage``  start, end, ``SpanListQuery``: spans across runs, filtered,
  sorted (start_time|duration_s|cost_usd|total_tokens) and paged (cursor, or offset <= 10,000) in the store;
  ``GET /api/spans/groups`` -> ``SpanGroups`` (``SpanGroupQuery``: the same filters, ``by`` a key).
- ``GET  /api/ingest`` -> ``IngestStatus`` (lag, queue, spool: shown on the dashboard; span
  counters of the caller's project only, all projects' with the admin token)
"""

from __future__ import annotations

import logging
import math
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, Field, model_validator

TIMESERIES_METRICS = (
    "runs",  # count per bucket
    "cost_usd",  # sum per bucket
    "input_tokens",
    "output_tokens",
    "tokens_per_s",  # output tokens per second of bucket
    "run_latency_p50",
    "run_latency_p95",  # seconds
    "ttft_p50",
    "ttft_p95",  # seconds
    "tpot_p50",
    "tpot_p95",  # seconds
    "steps_per_run",
    "tool_calls",
    "tool_failure_rate",  # 0..1
    "error_rate",  # runs with an error / runs
    "timeout_rate",  # tool or llm calls that timed out / calls
    "max_run_cost_usd",
    "max_steps",
    "success_rate",  # runs with outcome success / runs with an outcome
    "feedback_score",  # mean score
    "cost_per_success_usd",
    "tool_cache_hit_rate",  # tool calls served from a cache / tool calls (the cache lever)
    "small_model_share",  # LLM calls a router sent to the small model / LLM calls (the routing lever)
)
MetricName = Literal[TIMESERIES_METRICS]  # type: ignore[valid-type]


def finite_total(value: float) -> float:
    """A sum of costs is finite and never negative: ingestion bounds every value it stores
    (``collector.ingest.bounds``). Only rows stored before the bounds could sum to inf, NaN or a
    negative figure; such a total reads 0.0 (and is logged), never null in the JSON."""
    if math.isfinite(value) and value >= 0:
        return value
    logging.getLogger(__name__).error(
        "a cost total is %r: stored spans predate agentwatch_platform.collector.ingest.bounds; shown as 0", value
    )
    return 0.0


Total = Annotated[float, AfterValidator(finite_total)]


class RunSummary(BaseModel):
    trace_id: str
    agent: str
    name: str
    service: str = ""
    session_id: str = ""
    user_id: str = ""
    start_time: float  # epoch seconds
    end_time: float
    duration_s: float
    status: RunStatus  # running/incomplete: root not arrived
    outcome: str = ""
    budget_exceeded: str = ""
    steps: int
    llm_calls: int
    tool_calls: int
    tool_failures: int
    input_tokens: int
    output_tokens: int
    cached_tokens: int
    total_tokens: int
    cost_usd: Total
    models: list[str] = Field(default_factory=list)
    version: str = ""  # the agent's version (its root span's service.version); "" when none was recorded
    feedback_score: float | None = None


RunStatus = Literal["ok", "error", "timeout", "budget", "running", "incomplete"]
TextState = Literal["captured", "not_captured", "removed", "damaged"]


class RunFilters(BaseModel):
    """The query parameters of ``GET /api/runs`` besides the time range: which runs, in what
    order, which page. Every filter is applied by the store, over all runs of the range."""

    agent: str | None = Field(None, max_length=256)
    model: str | None = Field(None, max_length=256, description="runs that called this model")
    status: RunStatus | None = None
    outcome: str | None = Field(None, max_length=64)
    user_id: str | None = Field(None, max_length=256, description="exactly this user id")
    session_id: str | None = Field(None, max_length=256, description="exactly this session id")
    version: str | None = Field(
        None, max_length=256, description="exactly this agent version (the run's service.version)"
    )
    tool_failed: bool | None = Field(None, description="true: a tool call failed or timed out; false: none did")
    search: str | None = Field(
        None,
        max_length=256,
        description=(
            "case-insensitive substring of the trace id, user id, session id, agent or run name, "
            "or of captured prompt or completion text"
        ),
    )
    min_cost: float | None = Field(None, ge=0, allow_inf_nan=False)
    max_cost: float | None = Field(None, ge=0, allow_inf_nan=False)
    min_steps: int | None = Field(None, ge=0, le=2**31)
    max_steps: int | None = Field(None, ge=0, le=2**31)
    sort: str = Field("-start_time", max_length=64, description="a RunSummary column, '-' first for descending")
    limit: int = Field(50, ge=1, le=500)
    offset: int = Field(0, ge=0, le=10_000_000)

    def query(self) -> dict[str, object]:
        """The parameters a client sends (unset ones left out)."""
        return self.model_dump(exclude_none=True)


class RunsPage(BaseModel):
    items: list[RunSummary]
    total: int
    limit: int
    offset: int
    # What the search could not look at (a day file of captured text unreadable or damaged):
    # runs whose text is there may be missing from ``items``.
    warnings: list[str] = Field(default_factory=list)


class SpanOut(BaseModel):
    span_id: str
    parent_span_id: str
    name: str
    kind: str
    start_time: float
    end_time: float
    duration_s: float
    status: str
    status_message: str = ""
    error_type: str = ""
    is_timeout: bool = False
    model: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: Total = 0.0
    ttft_s: float | None = None
    tpot_s: float | None = None
    queue_s: float | None = None
    prefill_s: float | None = None
    decode_s: float | None = None
    tool_name: str = ""
    tool_cache_hit: bool = False
    step_index: int = -1
    finish_reason: str = ""
    agent: str = ""
    service: str = ""
    input_text: str = ""
    output_text: str = ""
    # Why the texts are empty, or that they are not: "not_captured" (capture off, or nothing to
    # capture), "removed" (by retention or a deletion), "damaged" (stored, but its file is gone,
    # torn or corrupt; never shown as another span's text), else "captured".
    text_state: TextState = "not_captured"
    attributes: dict[str, str] = Field(default_factory=dict)
    events: str = ""
    # Broken parent links, still counted in the run's totals: a parent that never arrived (or
    # is not stored), and spans whose parents lead back to themselves (shown under the run).
    parent_missing: bool = False
    in_cycle: bool = False


class FeedbackIn(BaseModel):
    score: float | None = Field(
        default=None, ge=-1e6, le=1e6, description="any rating scale within +-1e6 (means must stay finite)"
    )
    label: str = Field(default="", max_length=256)
    comment: str = Field(default="", max_length=10_000)
    source: Literal["user", "eval"] = "user"

    @model_validator(mode="after")
    def _says_something(self) -> FeedbackIn:
        """An empty body would store a row that says nothing (and count as a rating in no mean)."""
        if self.score is None and not self.label and not self.comment:
            raise ValueError("feedback needs at least one of score, label or comment")
        return self


class FeedbackOut(FeedbackIn):
    feedback_id: str
    trace_id: str
    created_at: float


class RunDetail(BaseModel):
    run: RunSummary
    spans: list[SpanOut]
    feedback: list[FeedbackOut] = Field(default_factory=list)
    agent_median_cost_usd: float | None = None


class Headline(BaseModel):
    value: float | None
    previous: float | None
    change: float | None  # relative change (value - previous) / previous, None if undefined
    unit: str


class Overview(BaseModel):
    start: float
    end: float
    figures: dict[str, Headline]  # keys: names from TIMESERIES_METRICS plus "runs_per_min", "cost_per_hour_usd"
    running_runs: int = 0  # runs of the range whose root has not arrived and that had a span within the idle timeout
    incomplete_runs: int = 0  # runs of the range whose root never arrived, idle for longer
    # requests of the range refused before any work (outcome "refused": a rate limit, a budget); no
    # runs, so in none of the figures (runs, latency, success and error rates, per-run cost)
    refused_runs: int = 0
    # the collector's watermark (``Freshness``): the range's figures after it may still grow;
    # cost_per_hour_usd is over the complete whole minutes of each range
    complete_until: float | None = None


class SeriesPoint(BaseModel):
    t: float  # bucket start, epoch seconds
    group: str  # "" when group_by=none
    value: float | None
    partial: bool = False  # the bucket ends after the collector's watermark: its figures may still grow


class TimeSeries(BaseModel):
    metric: str
    unit: str
    step_s: int
    group_by: str
    points: list[SeriesPoint]
    complete_until: float | None = None  # the collector's watermark when the series was read (``Freshness``)


class CostRow(BaseModel):
    key: str
    cost_usd: Total
    input_tokens: int = 0
    output_tokens: int = 0
    calls: int = 0


class CostLevers(BaseModel):
    """What the levers did in the range; under a model filter, over every call of the runs that
    used the model (the small model's share of one model's own calls would be 0 or 1)."""

    tool_calls: int
    tool_cache_hits: int
    tool_cache_hit_rate: float | None
    tokens_saved: int
    llm_calls: int
    small_model_calls: int
    small_model_share: float | None


class LeverSaving(BaseModel):
    """One cost lever over the range: what the calls or runs it touched cost, what they would
    have cost without it (its counterfactual, priced with the collector's price table), and the
    difference. ``events``: cache hits, routed calls, degraded runs, or requests delayed or refused."""

    lever: str  # cache | routing | degradation | rate_limit
    events: int
    actual_usd: float
    counterfactual_usd: float
    saving_usd: float
    basis: str  # how the counterfactual is counted, in one line
    detail: dict[str, float] = Field(default_factory=dict)  # lever-specific figures (tokens, delays, ...)


class LeverQuality(BaseModel):
    """Runs of the range a degradation acted in, or not (refused runs are in neither)."""

    group: str  # degraded | not degraded
    runs: int
    success_rate: float | None
    feedback_score: float | None
    feedback_count: int
    mean_cost_usd: float | None


class LeverSavings(BaseModel):
    price_version: str  # the price table the counterfactuals were priced with
    total_saving_usd: float
    levers: list[LeverSaving]
    quality: list[LeverQuality]


WHATIF_POLICIES = ("route", "cap_steps", "evolving_report")


class WhatIf(BaseModel):
    """A policy's estimated effect on the runs of a past range, from their stored spans: their cost
    as it was and as the policy would have made it, with a 95 % interval of the change (the
    spread of the per-run changes, as if the runs were a sample of the workload)."""

    policy: str  # route | cap_steps | evolving_report
    description: str  # the policy in words ("route 'research' steps to sim-small")
    basis: str  # how the estimate is made, in one line
    start: float
    end: float
    runs: int
    runs_changed: int
    calls_changed: int
    actual_usd: float
    estimate_usd: float
    change_usd: float
    change_ratio: float | None
    uncertainty_usd: float  # half-width of the 95 % interval of change_usd
    actual_tokens: int
    estimate_tokens: int
    price_version: str


class SelfHostedCost(BaseModel):
    gpu_hour_usd: float
    gpu_seconds: float
    tokens_served: int
    cost_per_1k_tokens_usd: float | None
    by_load: list[dict[str, float]] = Field(default_factory=list)  # {running_requests, cost_per_1k_tokens_usd}


class CostBreakdown(BaseModel):
    start: float
    end: float
    total_usd: Total
    by_model: list[CostRow]
    by_agent: list[CostRow]
    by_day: list[CostRow]  # key = YYYY-MM-DD
    month_to_date_usd: Total
    projected_month_usd: Total
    top_runs: list[RunSummary]
    levers: CostLevers
    cost_per_success_usd: float | None = None
    self_hosted: SelfHostedCost | None = None
    savings: LeverSavings | None = None  # measured saving per lever (None: not asked for)


class EngineInfo(BaseModel):
    engine: str  # scrape target name
    url: str
    model_names: list[str] = Field(default_factory=list)
    last_scrape: float | None = None


class EnginePoint(BaseModel):
    t: float
    metric: str  # e.g. vllm:num_requests_running, gpu:utilization
    labels: dict[str, str] = Field(default_factory=dict)
    value: float


class EngineCallTimings(BaseModel):
    """Percentiles of the engine's calls from their own spans (seconds; None: no such call): the
    engine's queue time and TTFT (queue + prefill, measured at the server) and the clients' TTFT
    (the first streamed token the client saw, network and client included)."""

    queue_calls: int = 0
    queue_p50: float | None = None
    queue_p95: float | None = None
    ttft_calls: int = 0
    ttft_p50: float | None = None
    ttft_p95: float | None = None
    client_calls: int = 0
    client_ttft_p50: float | None = None
    client_ttft_p95: float | None = None


class EngineSeries(BaseModel):
    engine: str
    points: list[EnginePoint]
    calls: EngineCallTimings = Field(default_factory=EngineCallTimings)


class AlertOut(BaseModel):
    alert_id: str
    fingerprint: str
    rule: str
    severity: str
    state: Literal["firing", "resolved"]
    scope: dict[str, str] = Field(default_factory=dict)
    metric: str
    value: float | None
    baseline: float | None
    threshold: float | None
    message: str
    started_at: float
    resolved_at: float | None = None
    last_notified_at: float | None = None
    peak: float | None = None  # the incident's most extreme value so far
    last_breach_at: float | None = None  # when the condition last held (the hold-down counts from here)
    no_data_since: float | None = None  # set while a firing incident's metric has no data


class AlertRuleOut(BaseModel):
    name: str
    metric: str
    scope: dict[str, str] = Field(default_factory=dict)
    window_s: int
    condition: dict[str, object]
    severity: str
    channels: list[str]
    cooldown_s: int  # the repeat interval of a still-firing incident (0 = never)
    for_s: int = 0
    keep_firing_for_s: int = 0
    resolve_after: int = 1
    no_data: str = "keep"
    top_k: int = 0  # judges only the k scopes highest now, plus open incidents (0 = every scope)


MAX_EPOCH_S = 1e10  # year 2286: beyond it DateTime64(3) and Int64 milliseconds stop being safe
Epoch = Annotated[float, Field(ge=0, le=MAX_EPOCH_S)]
ScopeName = Annotated[str, Field(max_length=256)]  # an agent, model, user or session name
ScopeValue = Annotated[str, Field(max_length=1024)]


class AlertIn(AlertOut):
    """An alert state written by an out-of-process evaluator (bounded, so storage never fails on it)."""

    alert_id: str = Field(min_length=1, max_length=64)
    fingerprint: str = Field(min_length=1, max_length=64)
    rule: str = Field(min_length=1, max_length=256)
    severity: str = Field(max_length=32)
    scope: dict[ScopeName, ScopeValue] = Field(default_factory=dict, max_length=16)
    metric: str = Field(max_length=64)
    message: str = Field(max_length=10_000)
    started_at: Epoch
    resolved_at: Epoch | None = None
    last_notified_at: Epoch | None = None
    updated_at: Epoch
    last_breach_at: Epoch | None = None
    no_data_since: Epoch | None = None


class DeliveryIn(BaseModel):
    """One attempt to deliver one notification on one channel, as ``alerts run`` records it."""

    alert_id: str = Field(min_length=1, max_length=64)
    channel: str = Field(min_length=1, max_length=128)
    attempt: int = Field(ge=1, le=65_535)
    ok: bool
    error: str = Field(default="", max_length=10_000)
    at: Epoch
    event: str = Field(default="", max_length=32)


class DeliveryOut(DeliveryIn):
    pass


class AlertContext(BaseModel):
    """The project a key belongs to: where ``alerts run`` files what it reads with that key."""

    project: str


class RunStates(BaseModel):
    """A run-state figure now, per group ("" = the project): stuck runs and crash rate."""

    metric: str
    values: dict[str, float | None]


class FilterValues(BaseModel):
    agents: list[str]
    models: list[str]
    services: list[str] = Field(default_factory=list)
    project: str = ""  # the caller's project: what the dashboard names on every page


class Freshness(BaseModel):
    """How far the stored figures are complete (``GET /api/freshness``).

    A call counts at its span's start but arrives when it ends, after the SDK's export delay, so
    the newest figures keep growing for a while. ``complete_until`` is the instant before which
    no more spans are expected: now less the longest arrival delay (span start to stored) of the
    last five minutes with a quarter and a second to spare (``delay_s``; a minute while fewer than 20
    calls arrived in them), and never past the earliest start among spans accepted but not yet
    stored (``in_flight_spans``). ``late_spans``: spans stored since the collector started whose
    start was before a watermark already given out (they revised a "complete" bucket)."""

    now: float
    complete_until: float
    delay_s: float
    in_flight_spans: int
    late_spans: int


class IngestStatus(BaseModel):
    received_spans: int
    stored_spans: int
    rejected_spans: int
    queued_spans: int
    spool_bytes: int
    lag_p50_s: float | None
    lag_p95_s: float | None
    store_available: bool
    # "project": the span counters are the caller's project's; "collector": all projects' (admin token)
    scope: Literal["project", "collector"] = "collector"


class ErrorOut(BaseModel):
    detail: str


# --- the span explorer: GET /api/spans, GET /api/spans/groups ------------------------------------
SpanStatus = Literal["ok", "unset", "error", "timeout"]
SPAN_SORTS = ("start_time", "duration_s", "cost_usd", "total_tokens")
SPAN_GROUP_KEYS = (
    "tool",
    "name",
    "model",
    "kind",
    "step",
    "error_type",
    "agent",
    "version",
    "user",
    "session",
    "status",
)
SPAN_GROUP_SORTS = (
    "spans",
    "failures",
    "failure_rate",
    "duration_p50_s",
    "duration_p95_s",
    "total_tokens",
    "cost_usd",
    "runs",
    "key",
)


class SpanQuery(BaseModel):
    """Which spans, across the runs of a time range: every filter is applied by the store, and
    they compose (AND). ``attribute`` is repeated ``key=value`` (a span attribute, or a resource
    attribute such as ``service.version``)."""

    kind: str | None = Field(None, max_length=64, description="run, step, llm, tool, retrieval, engine, other")
    name: str | None = Field(None, max_length=512, description="exactly this span name")
    tool: str | None = Field(None, max_length=256)
    model: str | None = Field(None, max_length=256)
    status: SpanStatus | None = Field(None, description="a timeout is 'timeout', not 'error'")
    failed: bool | None = Field(None, description="true: the span failed or timed out; false: it did not")
    error_type: str | None = Field(
        None, max_length=512, description="an error type as the groups name it: 'TimeoutError', 'X (HTTP 503)', or X"
    )
    agent: str | None = Field(None, max_length=256)
    step: str | None = Field(
        None, max_length=512, description="a step span of this name and the spans directly under it"
    )
    version: str | None = Field(None, max_length=256, description="the agent's version (service.version)")
    user_id: str | None = Field(None, max_length=256, description="spans of this user's runs")
    session_id: str | None = Field(None, max_length=256, description="spans of this session's runs")
    trace_id: str | None = Field(None, max_length=64, description="spans of one run")
    attribute: list[str] = Field(default_factory=list, max_length=8, description="key=value, repeatable")
    min_duration_s: float | None = Field(None, ge=0, allow_inf_nan=False)
    max_duration_s: float | None = Field(None, ge=0, allow_inf_nan=False)
    min_cost: float | None = Field(None, ge=0, allow_inf_nan=False)
    max_cost: float | None = Field(None, ge=0, allow_inf_nan=False)
    search: str | None = Field(
        None,
        max_length=256,
        description="case-insensitive substring of the span's name, tool, status message or captured text",
    )

    def filters(self) -> dict[str, object]:
        """The filters with a value, as the query layer takes them."""
        return self.model_dump(exclude_none=True, include=set(SpanQuery.model_fields))


class SpanListQuery(SpanQuery):
    """``GET /api/spans``: the filters, a sort and a page. Page with ``cursor`` (the previous page's
    ``next_cursor``: any depth) or ``offset`` (at most 10,000), not both."""

    sort: str = Field(
        "-start_time",
        max_length=32,
        description="start_time|duration_s|cost_usd|total_tokens, '-' first for descending",
    )
    limit: int = Field(50, ge=1, le=500)
    offset: int = Field(0, ge=0, le=10_000)
    cursor: str | None = Field(None, max_length=512)


class SpanGroupQuery(SpanQuery):
    """``GET /api/spans/groups``: the filters, the key (``by``) and the groups' order."""

    by: str = Field(
        "tool",
        max_length=300,
        description="tool|name|model|kind|step|error_type|agent|version|user|session|status|attribute:<key>",
    )
    sort: str = Field("-spans", max_length=32, description="a SpanGroup figure, '-' first for descending")
    limit: int = Field(100, ge=1, le=1000)


class SpanHit(BaseModel):
    """One span of the explorer's list, with what links it to its run."""

    trace_id: str
    span_id: str
    parent_span_id: str = ""
    name: str
    kind: str
    tool: str = ""
    model: str = ""
    status: str
    status_message: str = ""
    error_type: str = ""
    is_timeout: bool = False
    start_time: float
    duration_s: float
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    total_tokens: int = 0
    cost_usd: Total = 0.0
    agent: str = ""
    run_name: str = ""
    user_id: str = ""
    session_id: str = ""


class SpansPage(BaseModel):
    items: list[SpanHit]
    total: int  # spans matching the filters in the range
    limit: int
    offset: int
    next_cursor: str | None = None  # pass as ``cursor`` for the next page; None: this was the last
    warnings: list[str] = Field(default_factory=list)


class SpanGroup(BaseModel):
    key: str  # "" for spans without a value (agent, user, session, name, kind, status groups)
    spans: int
    failures: int  # failed or timed out
    failure_rate: float
    runs: int
    duration_p50_s: float | None = None
    duration_p95_s: float | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    cost_usd: Total = 0.0


class SpanGroups(BaseModel):
    by: str
    groups: list[SpanGroup]
    total_groups: int  # groups in all; ``groups`` holds the first ``limit``
    warnings: list[str] = Field(default_factory=list)


# --- versions (GET /api/versions, /api/versions/compare) -------------------------------------


class VersionFigures(BaseModel):
    """One agent version's finished runs that started in the range (refused requests are no runs)."""

    version: str  # the root span's service.version; "" for runs that recorded none
    runs: int
    cost_usd: Total  # the sum of its runs' costs
    cost_per_run: float
    tokens_per_run: float
    steps_per_run: float
    latency_mean_s: float
    latency_p50_s: float
    latency_p95_s: float
    success_rate: float | None  # runs with outcome success / runs with an outcome
    successes: int
    with_outcome: int
    error_rate: float  # runs that ended in error, timeout or over budget / runs
    tool_failures: int
    feedback_score: float | None  # mean of the rated runs' mean scores
    rated_runs: int
    first_seen: float  # epoch seconds of its first and last run in the range
    last_seen: float


class VersionsOut(BaseModel):
    start: float
    end: float
    items: list[VersionFigures]  # oldest first (by first run in the range)


class FigureChange(BaseModel):
    """``b - a`` of one figure, and whether it is beyond noise (``stats``: Welch's t-test for means,
    the two-proportion z-test for the success rate; 95 %)."""

    metric: str
    a: float | None
    b: float | None
    difference: float | None  # b - a
    relative: float | None  # (b - a) / a; None when a is 0 or missing
    low: float | None  # the 95 % interval of b - a
    high: float | None
    p_value: float | None
    significant: bool  # p < 0.05: the interval excludes 0
    test: str  # welch_t | two_proportion_z | none (too few runs)
    n_a: int  # runs (values) each side's test used
    n_b: int


class VersionComparison(BaseModel):
    start: float
    end: float
    a: VersionFigures
    b: VersionFigures
    changes: list[FigureChange]
    sampled: bool  # a side had more runs than the test reads (its latest runs were tested)


# --- users and sessions (GET /api/users, /api/sessions, /api/sessions/{id}) -------------------


class UserFigures(BaseModel):
    """One user's finished runs that started in the range (refused requests counted apart)."""

    user_id: str  # "" for the runs without a user id
    runs: int
    sessions: int
    cost_usd: Total
    cost_per_run: float
    cost_per_success: float | None  # cost / successful runs: what a task done costs for this user
    successes: int
    with_outcome: int
    success_rate: float | None
    error_rate: float
    feedback_score: float | None
    rated_runs: int
    budget_runs: int  # runs with a cost budget (agentwatch.Budget(max_cost_usd=...))
    budget_used: float | None  # their mean share of the budget spent
    budget_stops: int  # runs a budget stopped
    refused: int  # requests refused before any work (a rate limit, a budget): not runs
    first_seen: float
    last_seen: float
    trend: list[float]  # cost per bucket of the range (``UsersPage.step_s``), oldest first


class UsersPage(BaseModel):
    start: float
    end: float
    step_s: float
    items: list[UserFigures]
    total: int
    limit: int
    offset: int


class SessionSummary(BaseModel):
    session_id: str
    user_id: str
    runs: int
    cost_usd: Total
    successes: int
    with_outcome: int
    agents: list[str]
    first_seen: float
    last_seen: float
    last_end: float


class SessionsPage(BaseModel):
    items: list[SessionSummary]
    total: int
    limit: int
    offset: int


class SessionTurn(BaseModel):
    """One run of a session: what the user asked and got, where captured."""

    run: RunSummary
    asked: str | None  # the run's input (its root span's, else its first LLM call's); None: not captured
    answered: str | None  # the run's output (its root span's, else its last LLM call's)


class SessionDetail(BaseModel):
    session_id: str
    user_id: str
    cost_usd: Total  # of the runs listed
    refused: int
    turns: list[SessionTurn]  # in order of start
    truncated: bool  # more runs than listed
