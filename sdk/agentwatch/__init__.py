"""agentwatch: tracing, cost and budgets for LLM agents, on OpenTelemetry.

    import agentwatch
    agentwatch.init(project="demo")          # or AGENTWATCH_* environment variables

    @agentwatch.run("researcher", budget=agentwatch.Budget(max_cost_usd=0.50))
    def answer(question): ...

Everything public is imported here; the modules starting with ``_`` are private.
"""

from __future__ import annotations

from ._budget import AgentwatchError, Budget, BudgetExceeded, BudgetLeft
from ._config import VARIABLES as ENVIRONMENT_VARIABLES
from ._decorators import Run, current_run, llm, run, step, tool
from ._feedback import feedback
from ._levers import lever_attributes, record_lever
from ._llm_attributes import llm_attributes
from ._openai import instrument_openai, uninstrument_openai
from ._pricing import Price, PriceTable
from ._redact import builtin_redact as redact_text
from ._tracing import force_flush, init, sdk_version, shutdown, stats

__version__ = sdk_version()

__all__ = [
    "ENVIRONMENT_VARIABLES",
    "AgentwatchError",
    "Budget",
    "BudgetExceeded",
    "BudgetLeft",
    "Price",
    "PriceTable",
    "Run",
    "__version__",
    "current_run",
    "feedback",
    "force_flush",
    "init",
    "instrument_openai",
    "lever_attributes",
    "llm",
    "llm_attributes",
    "record_lever",
    "redact_text",
    "run",
    "shutdown",
    "stats",
    "step",
    "tool",
    "uninstrument_openai",
]
