"""Two runs side by side: what differs in how they worked (steps, tokens, cost per step, context
growth, tools called, outcome), from their details as the query API gives them."""

from __future__ import annotations

from collections import Counter

from agentwatch import semconv as sc

from agentwatch_api.schemas import RunDetail
from agentwatch_platform.dashboard import analysis, ui

# (row key, label): the figures compared, in order
FIGURES = (
    ("outcome", "outcome / status"),
    ("version", "version"),
    ("duration", "duration"),
    ("steps", "steps"),
    ("llm_calls", "LLM calls"),
    ("tokens", "tokens (input / output)"),
    ("cost", "cost"),
    ("cost_per_step", "cost per step"),
    ("context", "context growth"),
    ("last_input", "input tokens of the last LLM call"),
    ("tools", "tools called (failed)"),
)


def figures(detail: RunDetail) -> dict[str, str]:
    """One run's column of the comparison, formatted."""
    run = detail.run
    growth = analysis.context_growth(detail.spans)
    per_call = f", +{growth.tokens_added_per_call:,.0f} tokens a call" if growth.chosen != "too few calls" else ""
    return {
        "outcome": f"{run.outcome or ui.BLANK} / {run.status}",
        "version": run.version or ui.BLANK,
        "duration": ui.fmt(run.duration_s, "s"),
        "steps": f"{run.steps:,}",
        "llm_calls": f"{run.llm_calls:,}",
        "tokens": f"{run.input_tokens:,} / {run.output_tokens:,}",
        "cost": ui.fmt(run.cost_usd, "USD"),
        "cost_per_step": ui.fmt(run.cost_usd / run.steps, "USD") if run.steps else ui.BLANK,
        "context": growth.chosen + per_call,
        "last_input": f"{growth.input_tokens[-1]:,}" if growth.input_tokens else ui.BLANK,
        "tools": tools_called(detail) or "none",
    }


def tools_called(detail: RunDetail) -> str:
    """Each tool with its calls and failures, most called first: ``search ×4 (1 failed)``."""
    calls = Counter(s.tool_name or s.name for s in detail.spans if s.kind == sc.KIND_TOOL)
    failed = Counter(s.tool_name or s.name for s in detail.spans if s.kind == sc.KIND_TOOL and analysis.is_failed(s))
    return ", ".join(
        f"{name} ×{n}" + (f" ({failed[name]} failed)" if failed[name] else "") for name, n in calls.most_common()
    )


def per_step(detail: RunDetail) -> list[tuple[int, int, float]]:
    """(step, input tokens, cost) per step, in step order: the context each step sent and what it cost."""
    rows = analysis.step_rows(detail.spans)
    return [(int(str(r["step"])), int(str(r["input_tokens"])), float(str(r["cost_usd"]))) for r in rows]
