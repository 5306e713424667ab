"""The OpenAI-compatible HTTP server of the simulated engine (FastAPI).

``POST /v1/chat/completions`` (streaming SSE or not, tools and tool calls, usage with
``prompt_tokens_details.cached_tokens``), ``GET /v1/models``, ``GET /health`` and
``GET /metrics`` (vLLM's metric names). Every model is marked as a simulation. Each served
model has its own scheduler, like one vLLM instance per model. Bad requests get a 400 with
an OpenAI-style error body; an unknown model a 404, as from vLLM.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from . import policy
from .metrics import EngineMetrics
from .profiles import PROFILES, get_profile
from .runner import Job, ModelEngine
from .scheduler import POLICIES, Policy, SchedulerError
from .tokenizer import render_prompt, tokenize
from .tracing import EngineTracer

log = logging.getLogger(__name__)
OWNED_BY = "agentwatch-simulation"
_TRACE_HEADERS = ("traceparent", "tracestate")


class BadRequest(Exception):
    """A request the engine rejects; ``status`` and an OpenAI-style error body."""

    def __init__(self, message: str, *, param: str | None = None, status: int = 400) -> None:
        super().__init__(message)
        self.message, self.param, self.status = message, param, status

    def response(self) -> JSONResponse:
        kind = "NotFoundError" if self.status == 404 else "BadRequestError"
        body = {"error": {"message": self.message, "type": kind, "param": self.param, "code": self.status}}
        return JSONResponse(body, status_code=self.status)


@dataclass(frozen=True)
class EngineConfig:
    """How the simulated engine is set up; the CLI flags map one to one."""

    models: tuple[str, ...] = tuple(PROFILES)
    policy: Policy = "continuous"
    slots: int = 32
    kv_tokens: int = 131072
    speed: float = 1.0
    otlp_endpoint: str | None = None
    api_key: str | None = None

    def __post_init__(self) -> None:
        for model in self.models:
            get_profile(model)
        if self.policy not in POLICIES:
            raise ValueError(f"policy must be one of {POLICIES}, got {self.policy!r}")
        if self.speed <= 0:
            raise ValueError(f"speed must be > 0, got {self.speed}")


# --- request parsing ------------------------------------------------------------------------
@dataclass(frozen=True)
class ChatRequest:
    """The fields of a chat completion request that the simulation uses."""

    model: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    tool_choice_none: bool  # tools are in the prompt but may not be called
    stream: bool
    include_usage: bool
    max_tokens: int | None
    ignore_eos: bool
    params: dict[str, float | int | None]


def _optional_number(body: Mapping[str, Any], name: str, kind: type) -> Any:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and not isinstance(value, int)):
        raise BadRequest(f"'{name}' must be a{'n integer' if kind is int else ' number'}, got {value!r}", param=name)
    return value


def parse_chat_request(body: Any, served: Mapping[str, ModelEngine]) -> ChatRequest:
    """Validate a chat completion body; raises ``BadRequest`` naming what was wrong."""
    if not isinstance(body, dict):
        raise BadRequest("request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or model not in served:
        raise BadRequest(
            f"The model `{model}` does not exist. Served (simulated): {', '.join(served)}", param="model", status=404
        )
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) and "role" in m for m in messages):
        raise BadRequest("'messages' must be a non-empty list of objects with a 'role'", param="messages")
    tools = body.get("tools") or []
    if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
        raise BadRequest("'tools' must be a list of objects", param="tools")
    max_tokens = _optional_number(body, "max_completion_tokens", int) or _optional_number(body, "max_tokens", int)
    if max_tokens is not None and max_tokens < 1:
        raise BadRequest(f"'max_tokens' must be >= 1, got {max_tokens}", param="max_tokens")
    if body.get("n", 1) != 1:
        raise BadRequest("only n=1 is supported by the simulated engine", param="n")
    options = body.get("stream_options") or {}
    return ChatRequest(
        model=model,
        messages=messages,
        tools=tools,
        tool_choice_none=body.get("tool_choice") == "none",
        stream=bool(body.get("stream", False)),
        include_usage=bool(isinstance(options, dict) and options.get("include_usage")),
        max_tokens=max_tokens,
        ignore_eos=bool(body.get("ignore_eos", False)),
        params={
            "max_tokens": max_tokens,
            "temperature": _optional_number(body, "temperature", float),
            "top_p": _optional_number(body, "top_p", float),
        },
    )


# --- output planning: one delta per output token ----------------------------------------------
# A delta is (tool_call_index or None, text, tool name when it opens a call else None).
Delta = tuple[int | None, str, str | None]


def plan_output(answer: policy.Answer, *, max_tokens: int | None, ignore_eos: bool) -> tuple[list[Delta], str]:
    """The answer as one delta per token, cut at ``max_tokens``, and the finish reason."""
    deltas: list[Delta] = []
    if answer.tool_calls:
        for index, call in enumerate(answer.tool_calls):
            deltas.append((index, "", call.name))
            deltas.extend((index, piece, None) for piece in tokenize(call.arguments))
        reason = "tool_calls"
    else:
        deltas.extend((None, piece, None) for piece in tokenize(answer.content or ""))
        reason = "stop"
    if ignore_eos and max_tokens and not answer.tool_calls:
        filler = tokenize(" and so on")
        deltas.extend((None, filler[i % len(filler)], None) for i in range(max_tokens - len(deltas)))
    if max_tokens is not None and len(deltas) > max_tokens:
        return deltas[:max_tokens], "length"
    return deltas or [(None, "", None)], reason


# --- responses --------------------------------------------------------------------------------
def _tool_call_id(job: Job, index: int) -> str:
    return f"chatcmpl-tool-{job.request.request_id.split('-')[1]}{index:02d}"


def _usage(job: Job) -> dict[str, Any]:
    request = job.request
    return {
        "prompt_tokens": request.prompt_tokens,
        "completion_tokens": request.output_tokens,
        "total_tokens": request.prompt_tokens + request.output_tokens,
        "prompt_tokens_details": {"cached_tokens": request.cached_tokens},
    }


def _delta_json(job: Job, delta: Delta) -> dict[str, Any]:
    index, text, name = delta
    if index is None:
        return {"content": text}
    call: dict[str, Any] = {"index": index, "function": {"arguments": text}}
    if name is not None:
        call.update(id=_tool_call_id(job, index), type="function", function={"name": name, "arguments": ""})
    return {"tool_calls": [call]}


def _message(job: Job, deltas: list[Delta]) -> dict[str, Any]:
    calls: dict[int, dict[str, Any]] = {}
    content = ""
    for index, text, name in deltas:
        if index is None:
            content += text
        elif name is not None:
            calls[index] = {
                "id": _tool_call_id(job, index),
                "type": "function",
                "function": {"name": name, "arguments": ""},
            }
        else:
            calls[index]["function"]["arguments"] += text
    return {"role": "assistant", "content": None if calls else content, "tool_calls": list(calls.values())}


class _Chunks:
    """Builds the SSE chunks of one streamed completion."""

    def __init__(self, job: Job, model: str) -> None:
        self.job, self.model, self.created = job, model, int(job.arrival)

    def chunk(self, choices: list[dict[str, Any]], *, usage: bool) -> str:
        body: dict[str, Any] = {
            "id": self.job.request.request_id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": choices,
        }
        if usage:
            body["usage"] = None
        return f"data: {json.dumps(body)}\n\n"

    def choice(self, delta: dict[str, Any], finish_reason: str | None = None) -> list[dict[str, Any]]:
        return [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}]


class SimEngineServer:
    """The served models' engines, metrics and tracer, and the request handling."""

    def __init__(self, config: EngineConfig, *, metrics: EngineMetrics | None = None) -> None:
        self.config = config
        self.metrics = metrics or EngineMetrics()
        self.tracer = EngineTracer(config.otlp_endpoint, api_key=config.api_key) if config.otlp_endpoint else None
        self.engines: dict[str, ModelEngine] = {}

    def start(self) -> None:
        for name in self.config.models:
            engine = ModelEngine(
                get_profile(name),
                slots=self.config.slots,
                kv_tokens=self.config.kv_tokens,
                policy=self.config.policy,
                metrics=self.metrics.for_model(name),
                speed=self.config.speed,
                on_finished=self._export,
            )
            engine.start()
            self.engines[name] = engine
        log.info(
            "simulated engine (a simulation, not a model) serving %s, %s batching, %d slots, %d KV tokens, speed x%g",
            ", ".join(self.engines),
            self.config.policy,
            self.config.slots,
            self.config.kv_tokens,
            self.config.speed,
        )

    async def stop(self) -> None:
        for engine in self.engines.values():
            await engine.stop()
        if self.tracer is not None:
            await asyncio.to_thread(self.tracer.shutdown)

    def _export(self, job: Job) -> None:
        if self.tracer is not None:
            self.tracer.record(job.record(), job.carrier)

    def submit(self, chat: ChatRequest, headers: Mapping[str, str]) -> tuple[ModelEngine, Job, list[Delta]]:
        engine = self.engines[chat.model]
        answer = policy.decide(chat.messages, () if chat.tool_choice_none else chat.tools)
        deltas, reason = plan_output(answer, max_tokens=chat.max_tokens, ignore_eos=chat.ignore_eos)
        prompt = tokenize(render_prompt(chat.messages, chat.tools))
        limit = engine.profile.max_model_len
        if len(prompt) + (chat.max_tokens or 0) > limit:
            raise BadRequest(
                f"This model's maximum context length is {limit} tokens; the request has "
                f"{len(prompt)} prompt tokens and asks for max_tokens={chat.max_tokens}",
                param="max_tokens",
            )
        carrier = {key: headers[key] for key in _TRACE_HEADERS if key in headers}
        try:
            job = engine.submit(prompt, deltas, reason, params=chat.params, carrier=carrier)
        except SchedulerError as exc:
            raise BadRequest(str(exc), param="messages") from exc
        return engine, job, deltas

    async def complete(self, chat: ChatRequest, engine: ModelEngine, job: Job) -> dict[str, Any]:
        deltas: list[Delta] = [delta async for delta in engine.stream(job)]  # type: ignore[misc]
        return {
            "id": job.request.request_id,
            "object": "chat.completion",
            "created": int(job.arrival),
            "model": chat.model,
            "choices": [
                {"index": 0, "message": _message(job, deltas), "logprobs": None, "finish_reason": job.finish_reason}
            ],
            "usage": _usage(job),
        }

    async def stream(self, chat: ChatRequest, engine: ModelEngine, job: Job) -> AsyncIterator[str]:
        chunks = _Chunks(job, chat.model)
        done = False
        try:
            yield chunks.chunk(chunks.choice({"role": "assistant", "content": ""}), usage=chat.include_usage)
            async for delta in engine.stream(job):
                yield chunks.chunk(chunks.choice(_delta_json(job, delta)), usage=chat.include_usage)  # type: ignore[arg-type]
            done = job.finished is not None
            yield chunks.chunk(chunks.choice({}, job.finish_reason), usage=chat.include_usage)
            if chat.include_usage:
                body = {
                    "id": job.request.request_id,
                    "object": "chat.completion.chunk",
                    "created": chunks.created,
                    "model": chat.model,
                    "choices": [],
                    "usage": _usage(job),
                }
                yield f"data: {json.dumps(body)}\n\n"
            yield "data: [DONE]\n\n"
        finally:
            if not done:
                engine.abort(job)


def create_app(config: EngineConfig, *, metrics: EngineMetrics | None = None) -> FastAPI:
    """The FastAPI app of the simulated engine; engines start and stop with its lifespan."""
    sim = SimEngineServer(config, metrics=metrics)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        sim.start()
        try:
            yield
        finally:
            await sim.stop()

    app = FastAPI(title="agentwatch simulated LLM engine (a simulation)", lifespan=lifespan)
    app.state.sim = sim

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        try:
            try:
                body = await request.json()
            except ValueError as exc:
                raise BadRequest(f"request body is not valid JSON: {exc}") from exc
            chat = parse_chat_request(body, sim.engines)
            engine, job, _ = sim.submit(chat, request.headers)
        except BadRequest as exc:
            return exc.response()
        if chat.stream:
            return StreamingResponse(sim.stream(chat, engine, job), media_type="text/event-stream")
        try:
            return JSONResponse(await sim.complete(chat, engine, job))
        finally:
            if job.finished is None:
                engine.abort(job)

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        data = [
            {
                "id": name,
                "object": "model",
                "created": int(time.time()),
                "owned_by": OWNED_BY,
                "root": name,
                "max_model_len": get_profile(name).max_model_len,
                "description": get_profile(name).description,
            }
            for name in sim.engines
        ]
        return {"object": "list", "data": data}

    @app.get("/health")
    async def health() -> Response:
        return Response(status_code=200)

    @app.get("/metrics")
    async def prometheus_metrics() -> Response:
        return Response(generate_latest(sim.metrics.registry), media_type=CONTENT_TYPE_LATEST)

    return app


def serve(config: EngineConfig, *, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Run the simulated engine in the foreground until interrupted."""
    uvicorn.run(create_app(config), host=host, port=port, log_level="info")


@contextlib.contextmanager
def running_server(
    config: EngineConfig, *, host: str = "127.0.0.1", port: int, timeout_s: float = 10.0
) -> Iterator[str]:
    """Run the simulated engine in a background thread (tests, benchmarks); yields its base URL."""
    server = uvicorn.Server(uvicorn.Config(create_app(config), host=host, port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, name=f"sim-engine-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout_s
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError(f"simulated engine did not start on {host}:{port}")
        time.sleep(0.02)
    try:
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout_s)
