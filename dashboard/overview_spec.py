"""What the overview page shows: its headline figures and its charts (shared with the benchmark)."""

from __future__ import annotations

# (figure key, label, series that draws its sparkline, a rise is good)
HEADLINES = [
    ("runs", "Runs", "runs", True),
    ("runs_per_min", "Runs / min", "runs", True),
    ("cost_usd", "Cost", "cost_usd", False),
    ("cost_per_hour_usd", "Cost / hour", "cost_usd", False),
    ("cost_per_success_usd", "Cost / successful task", "cost_per_success_usd", False),
    ("success_rate", "Task success rate", "success_rate", True),
    ("run_latency_p50", "Run latency p50", "run_latency_p50", False),
    ("run_latency_p95", "Run latency p95", "run_latency_p95", False),
    ("ttft_p50", "TTFT p50", "ttft_p50", False),
    ("ttft_p95", "TTFT p95", "ttft_p95", False),
    ("tpot_p50", "TPOT p50", "tpot_p50", False),
    ("tpot_p95", "TPOT p95", "tpot_p95", False),
    ("tokens_per_s", "Output tokens / s", "tokens_per_s", True),
    ("steps_per_run", "Steps / run", "steps_per_run", False),
    ("tool_failure_rate", "Tool-failure rate", "tool_failure_rate", False),
    ("error_rate", "Error rate", "error_rate", False),
    ("timeout_rate", "Timeout rate", "timeout_rate", False),
    ("feedback_score", "Mean feedback score", "feedback_score", True),
]
# What each headline counts, shown under its label. "Runs" are runs that did work: a request refused
# before any work (outcome refused) is counted on its own card, in none of these.
HEADLINE_COUNTS = {
    "runs": "runs started in the range",
    "runs_per_min": "runs started, last complete bucket",
    "cost_usd": "every billed call",
    "cost_per_hour_usd": "billed calls, last complete bucket",
    "cost_per_success_usd": "cost / runs with outcome success",
    "success_rate": "success / runs with an outcome",
    "run_latency_p50": "finished runs, start to end",
    "run_latency_p95": "finished runs, start to end",
    "ttft_p50": "LLM calls, client-side",
    "ttft_p95": "LLM calls, client-side",
    "tpot_p50": "LLM calls after the first token",
    "tpot_p95": "LLM calls after the first token",
    "tokens_per_s": "output tokens over the range",
    "steps_per_run": "mean over runs",
    "tool_failure_rate": "failed / tool calls",
    "error_rate": "error, timeout or budget / runs",
    "timeout_rate": "timed out / LLM and tool calls",
    "feedback_score": "mean of feedback scores",
}
# tab -> [(title, metrics, group_by, stacked)]; one tab is drawn at a time, so the page stays light
CHARTS = {
    "Cost and volume": [
        ("Cost per bucket, by model", ["cost_usd"], "model", True),
        ("Runs per bucket", ["runs"], "none", False),
        ("Cost per successful task", ["cost_per_success_usd"], "none", False),
        ("Output tokens per second", ["tokens_per_s"], "none", False),
    ],
    "Latency": [
        ("Run latency", ["run_latency_p50", "run_latency_p95"], "none", False),
        ("Time to first token", ["ttft_p50", "ttft_p95"], "none", False),
        ("Time per output token", ["tpot_p50", "tpot_p95"], "none", False),
        ("Steps per run", ["steps_per_run"], "none", False),
    ],
    "Quality and failures": [
        ("Failure rates", ["tool_failure_rate", "error_rate", "timeout_rate"], "none", False),
        ("Task success rate", ["success_rate"], "none", False),
        ("Mean feedback score", ["feedback_score"], "none", False),
    ],
}
