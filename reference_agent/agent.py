"""The research agent: searches and reads a local corpus, then writes a report.

It is the example users copy, so it is instrumented only through the public SDK:
``agentwatch.run`` / ``step`` / ``tool`` and the SDK's automatic tracing of the OpenAI client.
Every LLM call goes through an ``openai.AsyncOpenAI`` client, so any OpenAI-compatible
endpoint works: the simulated engine, vLLM, or a hosted API.

Two modes the field compares:

- ``react``: the whole history (every tool call and result) goes back to the model every step,
  so a step's input tokens grow with the step count and a run's total with its square;
- ``iterative`` (evolving report): each step sees the question, a bounded report and the last
  result only, so a step's input stays bounded and a run's total grows linearly.

Cost levers it demonstrates: tool results are cached (hits traced with the tokens they
saved), the easy "what next / do I have enough?" decisions go to the small model and only the
synthesis to the large one (each LLM span says which: ``agentwatch.llm.model_tier``, set
with ``agentwatch.llm_attributes`` around the call), a step limit and an ``agentwatch.Budget``
stop runaway runs. Each routed call records the routing lever (``agentwatch.lever.*``, with the
large model it would have used); a cache hit records the cache lever. A ``RateLimiter`` (per
user and per project) queues or refuses runs, and a ``DegradationPolicy`` switches a run under
budget pressure or engine saturation to the small model, to fewer steps, or from ReAct to the
evolving report (``reference_agent.levers``); each records its lever on the span where it acted.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, NoReturn

import agentwatch
from opentelemetry import trace

from agentwatch_platform.reference_agent.engine.tokenizer import count_tokens
from agentwatch_platform.reference_agent.levers import DegradationPolicy, RateLimiter, projected_cost
from agentwatch_platform.reference_agent.tools import ResearchTools, ToolCache, ToolError, UnknownDocument

if TYPE_CHECKING:
    import openai


def _openai() -> Any:
    """The OpenAI client library, imported when a client is made or an error caught, not with this
    module: every ``agentwatch`` command registers the agent's (the collector's start included),
    and importing openai took ~0.25 s of each."""
    try:
        import openai
    except ModuleNotFoundError as exc:  # `agentwatch --help` names the missing extra in one line
        raise ModuleNotFoundError(
            "The OpenAI client is not installed: pip install 'agentwatch-platform[reference]'"
        ) from exc
    return openai


Mode = Literal["react", "iterative"]
MODES: tuple[str, ...] = ("react", "iterative")
AGENT_NAME = "research-agent"
# agentwatch's span attributes for what the SDK cannot know by itself (see the semantic conventions)
CACHE_HIT = "agentwatch.tool.cache_hit"
TOKENS_SAVED = "agentwatch.tool.tokens_saved"
MODEL_TIER = "agentwatch.llm.model_tier"

TOOL_SCHEMAS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "search",
            "description": "Search the document corpus; returns a JSON list of {id, title, snippet}.",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string", "description": "keywords to search for"}},
                "required": ["query"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "fetch",
            "description": "Read one document in full by its id (for example 'doc-0042').",
            "parameters": {
                "type": "object",
                "properties": {"doc_id": {"type": "string", "description": "a document id from search"}},
                "required": ["doc_id"],
            },
        },
    },
]

ACT_PROMPT = (
    "You are a research assistant. Use the tools to find and read documents that answer the "
    "question. Call one tool at a time."
)
ENOUGH_QUESTION = "Is the material gathered so far enough to answer the question? Reply yes or no with one reason."
REPORT_PROMPT = (
    "You are a research assistant. Write the final report that answers the question from the "
    "material below. Cite document ids in square brackets."
)


class AgentError(Exception):
    """The agent could not finish a run (an endpoint error, every tool retry failed)."""


@dataclass(frozen=True)
class AgentConfig:
    """How the agent works; the defaults suit the simulated engine."""

    mode: Mode = "iterative"
    model: str = "sim-large"  # synthesis (and everything when routing is off)
    small_model: str | None = "sim-small"  # the easy decisions; None turns routing off
    max_steps: int = 12
    tool_retries: int = 2
    backoff_s: float = 0.05
    tool_timeout_s: float = 1.0
    report_max_tokens: int = 400  # bound of the evolving report (iterative mode)
    max_output_tokens: int = 1024
    temperature: float = 0.0
    max_cost_usd: float | None = None
    max_seconds: float | None = None
    version: str | None = None  # the agent's version on its runs (agentwatch.run(version=...)); None: the process's
    degradation: DegradationPolicy | None = None
    # A crash to watch (the demo's): once this many research steps have ended and their spans
    # reached the collector, the process SIGKILLs itself; the run's root never comes.
    crash_after_steps: int | None = None
    step_pause_s: float = (
        0.0  # each research step waits this long after acting (a slow tool or a human): long runs to watch
    )

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"AgentConfig.mode must be one of {MODES}, got {self.mode!r}")
        if self.max_steps < 1:
            raise ValueError(f"AgentConfig.max_steps must be >= 1, got {self.max_steps}")
        if self.tool_retries < 0 or self.backoff_s < 0:
            raise ValueError("AgentConfig.tool_retries and backoff_s must be >= 0")
        if self.tool_timeout_s <= 0:
            raise ValueError(f"AgentConfig.tool_timeout_s must be > 0, got {self.tool_timeout_s}")
        if self.step_pause_s < 0:
            raise ValueError(f"AgentConfig.step_pause_s must be >= 0, got {self.step_pause_s}")
        if self.crash_after_steps is not None and self.crash_after_steps < 1:
            raise ValueError(f"AgentConfig.crash_after_steps must be >= 1, got {self.crash_after_steps}")

    @property
    def decision_model(self) -> str:
        return self.small_model or self.model


@dataclass
class RunResult:
    """What one run did, as the agent itself counted it (the collector's view is the traces)."""

    question: str
    mode: str
    outcome: str = "failure"  # success | failure | abandoned | refused (turned away before any work)
    reason: str = ""
    report: str = ""
    steps: int = 0  # research steps, plus the synthesis step when it ran
    llm_calls: int = 0
    tool_calls: int = 0
    tool_failures: int = 0
    tool_timeouts: int = 0
    cache_hits: int = 0
    tokens_saved: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float = 0.0
    duration_s: float = 0.0
    budget_exceeded: str = ""
    degraded: str = ""  # the degradation action taken, if any
    rate_limit_delay_s: float = 0.0
    rate_limited: bool = False  # refused by the rate limiter
    trace_id: str = ""
    step_input_tokens: list[int] = field(default_factory=list)  # input tokens of each decision call


@dataclass
class _Reply:
    content: str
    tool_calls: list[dict[str, Any]]
    input_tokens: int
    output_tokens: int
    cached_tokens: int


@dataclass
class _State:
    """The agent's memory: the full history (react) or a bounded report (iterative)."""

    question: str
    mode: str
    model: str  # synthesis
    decision_model: str
    max_steps: int
    history: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    last_result: str = ""
    degraded: bool = False
    capped: bool = False  # a degradation capped the steps: the run writes its report at the cap


class ResearchAgent:
    """Answers research questions with ``search`` and ``fetch``; one instance serves many runs."""

    def __init__(
        self,
        client: openai.AsyncOpenAI,
        tools: ResearchTools,
        *,
        config: AgentConfig | None = None,
        cache: ToolCache | None = None,
        seed: int = 0,
        rate_limiter: RateLimiter | None = None,
    ) -> None:
        self.client = client
        self.tools = tools
        self.config = config or AgentConfig()
        self.cache = cache if cache is not None else ToolCache()
        self.rate_limiter = rate_limiter
        self._rng = random.Random(seed)
        self._prices = agentwatch.PriceTable()
        self._finished = (
            0,
            0,
        )  # runs that finished undegraded: count, total research steps (a projection's expectation)

    async def run(self, question: str, *, user_id: str = "", session_id: str = "") -> RunResult:
        """Research ``question`` to a report; never raises for a failed run, the result says why."""
        result = RunResult(question=question, mode=self.config.mode)
        started = time.monotonic()
        try:
            await self._traced_run(question, result, user_id=user_id, session_id=session_id)
        except agentwatch.BudgetExceeded as exc:
            result.outcome, result.reason = "abandoned", str(exc)
            result.budget_exceeded = exc.limit
        except (AgentError, _openai().OpenAIError) as exc:
            result.outcome, result.reason = "failure", f"{type(exc).__name__}: {exc}"
        result.duration_s = time.monotonic() - started
        return result

    async def _traced_run(self, question: str, result: RunResult, *, user_id: str, session_id: str) -> None:
        """The run span wraps everything; exceptions leave it so the SDK records them."""
        budget = agentwatch.Budget(
            max_cost_usd=self.config.max_cost_usd, max_steps=None, max_seconds=self.config.max_seconds
        )
        with agentwatch.run(
            AGENT_NAME,
            user_id=user_id or None,
            session_id=session_id or None,
            tags=[self.config.mode],
            budget=budget,
            version=self.config.version,
        ) as run:
            result.trace_id = run.trace_id
            if not await self._admitted(result, user_id):
                run.set_outcome("refused", reason=result.reason)  # not a run: counted on its own
                return
            try:
                await self._research(self._new_state(question), result)
            except agentwatch.BudgetExceeded as exc:
                run.set_outcome("abandoned", reason=str(exc))
                raise
            except (AgentError, _openai().OpenAIError) as exc:
                run.set_outcome("failure", reason=f"{type(exc).__name__}: {exc}")
                raise
            run.set_outcome(result.outcome, reason=result.reason)
        self._count_finished(result)

    def _new_state(self, question: str) -> _State:
        return _State(
            question,
            mode=self.config.mode,
            model=self.config.model,
            decision_model=self.config.decision_model,
            max_steps=self.config.max_steps,
        )

    async def _admitted(self, result: RunResult, user_id: str) -> bool:
        """The rate limiter's word on this run (recorded on the run span when it acts)."""
        if self.rate_limiter is None:
            return True
        admission = await self.rate_limiter.admit(user_id)
        if admission.refused:
            agentwatch.record_lever("rate_limit", reason=admission.reason, change="run refused", refused=True)
            result.outcome, result.reason, result.rate_limited = "refused", f"rate limited: {admission.reason}", True
            return False
        if admission.delay_s:
            agentwatch.record_lever(
                "rate_limit",
                reason=admission.reason,
                change=f"run queued {admission.delay_s:.2f} s",
                delay_s=admission.delay_s,
            )
            result.rate_limit_delay_s = admission.delay_s
        return True

    def _count_finished(self, result: RunResult) -> None:
        if result.outcome == "success" and not result.degraded:
            count, steps = self._finished
            self._finished = (count + 1, steps + result.steps - 1)

    async def _research(self, state: _State, result: RunResult) -> None:
        """Step until the small model says the material is enough, then synthesize."""
        index, step_cost = 0, 0.0
        while index < state.max_steps:
            result.steps = index + 1
            with agentwatch.step("research"):
                cost_before = result.cost_usd
                await self._maybe_degrade(state, result, index, step_cost)
                if state.notes and await self._enough(state, result):
                    break
                reply = await self._chat(
                    state.decision_model, self._act_messages(state), result, tools=TOOL_SCHEMAS, routed=True
                )
                result.step_input_tokens.append(reply.input_tokens)
                if not reply.tool_calls:
                    break  # the model answered instead of acting: nothing left to look up
                await self._act(state, reply, result)
                step_cost = result.cost_usd - cost_before
                if self.config.step_pause_s:
                    await asyncio.sleep(self.config.step_pause_s)  # inside the step: it stays open meanwhile
            index += 1
            if index == self.config.crash_after_steps:
                _crash()
        else:
            if not state.capped:
                result.outcome, result.reason = "abandoned", f"step limit ({state.max_steps}) reached"
                return
        await self._write_report(state, result)

    async def _maybe_degrade(self, state: _State, result: RunResult, index: int, step_cost: float) -> None:
        """Once per run, under pressure: the policy's action, recorded on this step's span."""
        policy = self.config.degradation
        if policy is None or state.degraded or index == 0:
            return
        why = await policy.pressure(self._budget_used(result))
        if why is None:
            return
        projected = self._projected(state, result, index, step_cost)  # as the run was going, before the switch
        change = self._degrade(state, policy, index)
        if change is None:
            return
        agentwatch.record_lever(
            "degradation", reason=why, change=change, cost_so_far_usd=result.cost_usd, projected_cost_usd=projected
        )
        state.degraded, result.degraded = True, policy.action

    def _projected(self, state: _State, result: RunResult, index: int, step_cost: float) -> float:
        """The run's cost had it gone on undegraded: its latest step's cost for each step it was
        expected to take still (the mean of undegraded runs), and the synthesis on its model priced
        from the material gathered so far."""
        count, steps = self._finished
        expected = steps / count if count else float(self.config.max_steps)
        synthesis = self._prices.cost(
            state.model, count_tokens(json.dumps(self._report_messages(state))), self.config.report_max_tokens
        )
        return projected_cost(result.cost_usd, step_cost, index, expected, synthesis)

    def _budget_used(self, result: RunResult) -> float | None:
        """The SDK's share of the run's budget spent, or the agent's own count of the cost when that is
        more (the SDK off, or its OpenAI instrumentation: then it sees no LLM cost)."""
        run = agentwatch.current_run()
        limit = self.config.max_cost_usd
        shares = [
            x
            for x in (run.budget_used() if run is not None else None, result.cost_usd / limit if limit else None)
            if x is not None
        ]
        return max(shares, default=None)

    def _degrade(self, state: _State, policy: DegradationPolicy, index: int) -> str | None:
        """Apply ``policy.action`` to this run; what it changed, or None when there is nothing to change."""
        if policy.action == "small_model":
            small = self.config.small_model
            if not small or state.model == small:
                return None
            before, state.model, state.decision_model = state.model, small, small
            return f"model {before} -> {small}"
        if policy.action == "cap_steps":
            cap = min(state.max_steps, index + policy.cap_steps)
            steps, state.max_steps, state.capped = state.max_steps, cap, True
            return f"max_steps {steps} -> {cap}"
        if state.mode == "iterative":
            return None
        state.mode = "iterative"
        return "mode react -> iterative"

    async def _enough(self, state: _State, result: RunResult) -> bool:
        """The easy decision, asked of the small model: do we have enough to write?"""
        messages = [*self._act_messages(state), {"role": "user", "content": ENOUGH_QUESTION}]
        reply = await self._chat(state.decision_model, messages, result, routed=True)
        return reply.content.strip().lower().startswith("yes")

    async def _write_report(self, state: _State, result: RunResult) -> None:
        """Synthesis, the hard part, goes to the large model; the report tool stores it."""
        result.steps += 1
        with agentwatch.step("synthesize"):
            reply = await self._chat(state.model, self._report_messages(state), result)
            async with agentwatch.tool("report"):
                if not reply.content.strip():
                    raise AgentError(f"model {state.model!r} returned an empty report")
                result.report = reply.content.strip()
        result.outcome, result.reason = "success", "report written"

    # --- model calls -----------------------------------------------------------------------

    async def _chat(
        self,
        model: str,
        messages: list[dict[str, Any]],
        result: RunResult,
        *,
        tools: list[dict[str, Any]] | None = None,
        routed: bool = False,
    ) -> _Reply:
        """One streamed chat completion; usage comes in the final chunk. ``routed``: an easy
        decision, which the router sends to the small model (a lever, when it did)."""
        # a plain request, as the agent keeps its history: plain dicts, not the client's TypedDicts
        request: dict[str, Any] = {
            "model": model,
            "messages": messages,
            "stream": True,
            "stream_options": {"include_usage": True},
            "max_tokens": self.config.max_output_tokens,
            "temperature": self.config.temperature,
        }
        if tools:
            request.update(tools=tools, tool_choice="auto")
        with agentwatch.llm_attributes(self._llm_labels(model, routed)):  # the router's choice, on the LLM span
            stream = await self.client.chat.completions.create(**request)
        reply = await _collect(stream, fallback_input=count_tokens(json.dumps(messages)))
        result.llm_calls += 1
        result.input_tokens += reply.input_tokens
        result.output_tokens += reply.output_tokens
        result.cached_tokens += reply.cached_tokens
        result.cost_usd += self._prices.cost(model, reply.input_tokens, reply.output_tokens, reply.cached_tokens)
        return reply

    def _tier(self, model: str) -> str:
        routing = self.config.small_model is not None and self.config.small_model != self.config.model
        return "small" if routing and model == self.config.small_model else "large"

    def _llm_labels(self, model: str, routed: bool) -> dict[str, Any]:
        labels: dict[str, Any] = {MODEL_TIER: self._tier(model)}
        if routed and model == self.config.small_model and model != self.config.model:
            labels.update(
                agentwatch.lever_attributes(
                    "routing",
                    reason="easy decision",
                    baseline_model=self.config.model,
                    change=f"{self.config.model} -> {model}",
                )
            )
        return labels

    def _act_messages(self, state: _State) -> list[dict[str, Any]]:
        if state.mode == "react":
            return [
                {"role": "system", "content": ACT_PROMPT},
                {"role": "user", "content": f"Question: {state.question}"},
                *state.history,
            ]
        return [{"role": "system", "content": ACT_PROMPT}, {"role": "user", "content": self._bounded_brief(state)}]

    def _report_messages(self, state: _State) -> list[dict[str, Any]]:
        if state.mode == "react":
            material = "\n\n".join(str(m.get("content") or "") for m in state.history if m["role"] == "tool")
        else:
            material = self._report_text(state)
        return [
            {"role": "system", "content": REPORT_PROMPT},
            {"role": "user", "content": f"Question: {state.question}\n\nMaterial:\n{material}"},
        ]

    def _bounded_brief(self, state: _State) -> str:
        """Question + bounded report + last result: the whole context of an iterative step."""
        return (
            f"Question: {state.question}\n\nReport so far:\n{self._report_text(state) or '(empty)'}"
            f"\n\nLast result:\n{_clip(state.last_result, self.config.report_max_tokens)}"
        )

    def _report_text(self, state: _State) -> str:
        """The evolving report: the newest notes that fit in ``report_max_tokens``."""
        kept: list[str] = []
        budget = self.config.report_max_tokens
        for note in reversed(state.notes):
            budget -= count_tokens(note) + 1
            if budget < 0:
                break
            kept.append(note)
        return "\n".join(reversed(kept))

    # --- tools -----------------------------------------------------------------------------

    async def _act(self, state: _State, reply: _Reply, result: RunResult) -> None:
        """Run the requested tools and remember what they said."""
        if state.mode == "react":
            state.history.append(
                {"role": "assistant", "content": reply.content or None, "tool_calls": reply.tool_calls}
            )
        for call in reply.tool_calls:
            name, argument = _parse_call(call)
            output = await self._call_tool(name, argument, result)
            state.last_result = output
            state.notes.append(_note(name, argument, output))
            if state.mode == "react":
                state.history.append({"role": "tool", "tool_call_id": call["id"], "content": output})

    async def _call_tool(self, name: str, argument: str, result: RunResult) -> str:
        """Cached, retried with exponential backoff and jitter; a bad call becomes an error text."""
        if name not in ("search", "fetch"):
            return f"error: unknown tool {name!r}; use search or fetch"
        cached = self.cache.get(name, argument)
        if cached is not None:
            async with agentwatch.tool(name):
                result.tool_calls += 1
                saved = count_tokens(cached)
                _annotate({CACHE_HIT: True, TOKENS_SAVED: saved})
                agentwatch.record_lever("cache", reason="same call earlier", change=f"{name} served from the cache")
            result.cache_hits += 1
            result.tokens_saved += saved
            return cached
        return await self._call_with_retries(name, argument, result)

    async def _call_with_retries(self, name: str, argument: str, result: RunResult) -> str:
        """Transient failures are retried; a bad argument or exhausted retries go back to the model."""
        last: Exception | None = None
        for attempt in range(self.config.tool_retries + 1):
            if attempt:
                await asyncio.sleep(self.config.backoff_s * 2 ** (attempt - 1) * (0.5 + self._rng.random()))
            try:
                output = await self._call_once(name, argument, result)
            except UnknownDocument as exc:
                result.tool_failures += 1
                return f"error: {exc}"
            except (ToolError, TimeoutError) as exc:
                result.tool_failures += 1
                result.tool_timeouts += isinstance(exc, TimeoutError)
                last = exc
                continue
            self.cache.put(name, argument, output)
            return output
        return f"error: {name} failed {self.config.tool_retries + 1} times, last: {last}"

    async def _call_once(self, name: str, argument: str, result: RunResult) -> str:
        """One attempt; the SDK's tool timeout cuts a call that hangs (and traces it as a timeout)."""
        async with agentwatch.tool(name, timeout=self.config.tool_timeout_s):
            result.tool_calls += 1
            _annotate({CACHE_HIT: False})
            if name == "search":
                return await self.tools.search(argument)
            return await self.tools.fetch(argument)


def make_client(base_url: str, api_key: str, *, timeout_s: float = 120.0, max_retries: int = 2) -> openai.AsyncOpenAI:
    """A plain OpenAI client for any OpenAI-compatible endpoint (the SDK traces it by itself)."""
    client: openai.AsyncOpenAI = _openai().AsyncOpenAI(
        base_url=base_url, api_key=api_key, max_retries=max_retries, timeout=timeout_s
    )
    return client


def _annotate(attributes: dict[str, Any]) -> None:
    """Add attributes to the span the SDK opened around this code."""
    span = trace.get_current_span()
    for key, value in attributes.items():
        span.set_attribute(key, value)


async def _collect(stream: Any, *, fallback_input: int) -> _Reply:
    """Assemble a streamed completion: text, tool calls (by index) and usage."""
    content: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    usage = None
    async for chunk in stream:
        usage = getattr(chunk, "usage", None) or usage
        for choice in chunk.choices or ():
            delta = choice.delta
            content.append(delta.content or "")
            for part in delta.tool_calls or ():
                call = calls.setdefault(
                    part.index, {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
                )
                call["id"] = part.id or call["id"]
                if part.function is not None:
                    call["function"]["name"] += part.function.name or ""
                    call["function"]["arguments"] += part.function.arguments or ""
    text = "".join(content)
    for number, call in calls.items():
        call["id"] = call["id"] or f"call_{number}"
    if usage is None:
        return _Reply(text, [calls[i] for i in sorted(calls)], fallback_input, count_tokens(text), 0)
    details = getattr(usage, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None) or 0
    return _Reply(text, [calls[i] for i in sorted(calls)], usage.prompt_tokens, usage.completion_tokens, cached)


def _parse_call(call: dict[str, Any]) -> tuple[str, str]:
    """The tool name and its one argument; malformed JSON arguments are passed as raw text."""
    function = call["function"]
    try:
        arguments = json.loads(function["arguments"] or "{}")
    except json.JSONDecodeError:
        return function["name"], function["arguments"]
    if not isinstance(arguments, dict):
        return function["name"], str(arguments)
    return function["name"], str(arguments.get("query") or arguments.get("doc_id") or "")


def _note(name: str, argument: str, output: str) -> str:
    """One line of the evolving report. Read documents are cited as ``[id]``, found ones as
    ``"id": ...`` JSON, so a model reading only the report still knows both."""
    if output.startswith("error"):
        return f"- {name} {argument!r} failed"
    parsed = json.loads(output)
    if name == "fetch":
        first = parsed["text"].split(". ", 1)[0]
        return f"- [{parsed['id']}] {parsed['title']}: {first}."
    return f"- search {argument!r} found " + json.dumps([{"id": hit["id"]} for hit in parsed])


def _clip(text: str, max_tokens: int) -> str:
    """At most ``max_tokens`` tokens of ``text`` (approximately, 4 characters a token)."""
    limit = max_tokens * 4
    return text if len(text) <= limit else text[:limit] + " ..."


def _crash() -> NoReturn:
    """``AgentConfig.crash_after_steps``: the spans ended so far reach the collector (waited for,
    so that a slow machine still shows the run it crashed in), then SIGKILL, as a crash would."""
    agentwatch.force_flush(timeout_s=120.0)
    os.kill(os.getpid(), signal.SIGKILL)
    raise SystemExit(137)  # not reached
