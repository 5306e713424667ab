"""Generated spans for the span explorer's tests: many runs of two agents, users and sessions,
tool calls that fail as the reference agent's do (503s, timeouts with an empty message), a
third-party tool span that says only its HTTP status, and attributes; every figure the explorer
gives is summed here by hand from the same rows."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from agentwatch_platform.collector.storage.model import SpanRow
from tests.collector.factories import new_span_id, new_trace_id

TOOL_FAILURE = "reference_agent.tools.ToolFailure"


@dataclass
class Generated:
    spans: list[SpanRow] = field(default_factory=list)
    run_user: dict[str, str] = field(default_factory=dict)  # trace id -> user
    run_session: dict[str, str] = field(default_factory=dict)
    step_of: dict[str, str] = field(default_factory=dict)  # step span id -> its name

    def step(self, span: SpanRow) -> str:
        """The step a span ran in: its own name for a step span, its parent step's otherwise."""
        return span.name if span.kind == "step" else self.step_of.get(span.parent_span_id, "")


def _span(trace: str, parent: str, t0: int, **fields: object) -> SpanRow:
    duration = int(fields.pop("duration_ns", 100_000_000))  # type: ignore[call-overload]
    return SpanRow(
        trace_id=trace,
        span_id=new_span_id(),
        parent_span_id=parent,
        start_time_ns=t0,
        end_time_ns=t0 + duration,
        service_name="svc",
        **fields,  # type: ignore[arg-type]
    )


def _tool_span(rng: random.Random, trace: str, parent: str, t0: int, common: dict) -> SpanRow:
    tool = rng.choice(["search", "fetch", "fetch"])
    roll = rng.random()
    fields: dict = {"name": f"tool {tool}", "kind": "tool", "tool_name": tool, "status_code": "ok"}
    if roll < 0.15:  # the reference agent's simulated 503
        fields |= {
            "status_code": "error",
            "error_type": TOOL_FAILURE,
            "status_message": "ToolFailure: tool backend answered 503 (simulated failure)",
        }
    elif roll < 0.25:  # the SDK's tool timeout: TimeoutError with no message
        fields |= {
            "status_code": "error",
            "is_timeout": True,
            "error_type": "TimeoutError",
            "status_message": "TimeoutError: ",
        }
    elif roll < 0.30:  # a third-party span: no error type, the message names none, an HTTP status attribute
        fields |= {
            "status_code": "error",
            "status_message": "upstream failed",
            "attributes": {"http.status_code": "502"},
        }
    elif roll < 0.33:  # a timeout that only says so in its message
        fields |= {"status_code": "error", "status_message": "TimeoutError: "}
    return _span(trace, parent, t0, duration_ns=rng.randint(1, 3000) * 1_000_000, **common, **fields)


def generate(project: str, start_s: int, *, runs: int = 60, seed: int = 7) -> Generated:
    """``runs`` runs in [start_s, start_s + 3000): a run span, steps with an LLM call and a tool call."""
    rng = random.Random(seed)
    out = Generated()
    for r in range(runs):
        trace = new_trace_id(rng)
        agent = rng.choice(["researcher", "writer"])
        user, session = f"user-{rng.randint(1, 5)}", f"session-{rng.randint(1, 8)}"
        out.run_user[trace], out.run_session[trace] = user, session
        t0 = int((start_s + r * 50) * 1e9)
        version = rng.choice(["1.0", "1.1"])
        common = {"project": project, "agent_name": agent, "service_version": version}
        root = _span(
            trace,
            "",
            t0,
            duration_ns=40_000_000_000,
            name=agent,
            kind="run",
            user_id=user,
            session_id=session,
            resource={"service.version": version},
            **common,
        )
        out.spans.append(root)
        for i in range(rng.randint(1, 4)):
            t = t0 + (i + 1) * 5_000_000_000
            step = _span(
                trace,
                root.span_id,
                t,
                duration_ns=4_900_000_000,
                name=rng.choice(["research", "synthesize"]),
                kind="step",
                **common,
            )
            out.spans.append(step)
            out.step_of[step.span_id] = step.name
            model = rng.choice(["sim-small", "sim-large"])
            llm_in, llm_out = rng.randint(50, 500), rng.randint(5, 80)
            cost = round(llm_in * 1e-5 + llm_out * 3e-5, 8) * (5 if model == "sim-large" else 1)
            out.spans.append(
                _span(
                    trace,
                    step.span_id,
                    t,
                    duration_ns=rng.randint(100, 4000) * 1_000_000,
                    name="chat",
                    kind="llm",
                    model=model,
                    input_tokens=llm_in,
                    output_tokens=llm_out,
                    cost_usd=cost,
                    attributes={"step.kind": rng.choice(["plan", "act"])},
                    **common,
                )
            )
            out.spans.append(_tool_span(rng, trace, step.span_id, t + 4_500_000_000, common))
    return out
