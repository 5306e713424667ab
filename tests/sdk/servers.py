"""Real HTTP servers on 127.0.0.1 for the SDK tests.

``OtlpReceiver``: an OTLP/HTTP trace receiver that decodes ``ExportTraceServiceRequest``
protobuf bodies (and, on other paths, records JSON bodies, e.g. feedback). Its answers can be
scripted: a list of status codes to return first, a delay per request, a gate that holds
requests in flight until released, and a number of spans to reject in an OTLP partial success.

``FakeOpenAI``: an OpenAI-compatible ``/v1/chat/completions`` that streams SSE chunks with
real delays (first chunk after ``ttft_s``, then one token every ``token_s``), answers with a
tool call when the request offers tools, and reports usage in a last chunk when asked.
It stands in for a model server, which is outside this machine.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from tests.support.ports import free_port


class _Server:
    """A ThreadingHTTPServer on a free loopback port, served from a daemon thread."""

    handler: type[BaseHTTPRequestHandler]

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        handler = type("Handler", (self.handler,), {"server_state": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", self.port), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"test-{type(self).__name__}",
            daemon=True,
        )

    def __enter__(self) -> _Server:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5)


class _OtlpHandler(BaseHTTPRequestHandler):
    server_state: OtlpReceiver

    def log_message(self, *args: object) -> None:
        return None

    def do_POST(self) -> None:  # noqa: N802
        state = self.server_state
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        state.arrived.set()
        state.release.wait(10)
        if state.delay_s:
            time.sleep(state.delay_s)
        status = state.next_status()
        answer = b""
        with state.lock:
            state.requests.append({"path": self.path, "headers": dict(self.headers), "body": body, "status": status})
            if status == 200 and self.path == "/v1/traces":
                state.spans.extend(_decode_spans(body))
                answer = _partial_success(state.reject)
        self.send_response(status)
        if status in (429, 503):
            self.send_header("Retry-After", "0")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)


def _partial_success(rejected: int) -> bytes:
    if not rejected:
        return b""
    response = ExportTraceServiceResponse()
    response.partial_success.rejected_spans = rejected
    response.partial_success.error_message = "rejected by the test receiver"
    return response.SerializeToString()


def _decode_spans(body: bytes) -> list[dict[str, Any]]:
    request = ExportTraceServiceRequest.FromString(body)
    spans = []
    for resource_spans in request.resource_spans:
        resource = {kv.key: _value(kv.value) for kv in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                spans.append(
                    {
                        "name": span.name,
                        "trace_id": span.trace_id.hex(),
                        "span_id": span.span_id.hex(),
                        "parent_span_id": span.parent_span_id.hex(),
                        "attributes": {kv.key: _value(kv.value) for kv in span.attributes},
                        "resource": resource,
                        "status_code": span.status.code,
                        "events": [event.name for event in span.events],
                    }
                )
    return spans


def _value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    return getattr(value, kind) if kind else None


class OtlpReceiver(_Server):
    handler = _OtlpHandler

    def __init__(self, statuses: list[int] | None = None, delay_s: float = 0.0, reject: int = 0) -> None:
        super().__init__()
        self.lock = threading.Lock()
        self.spans: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []
        self.statuses = list(statuses or [])
        self.delay_s = delay_s
        self.reject = reject  # spans each accepted request reports rejected (partial success)
        self.arrived = threading.Event()  # set by every request
        self.release = threading.Event()  # cleared: requests wait (in flight) until it is set
        self.release.set()

    def next_status(self) -> int:
        with self.lock:
            return self.statuses.pop(0) if self.statuses else 200

    def wait_for_spans(self, count: int, timeout_s: float = 5.0) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and len(self.spans) < count:
            time.sleep(0.02)
        return list(self.spans)


class _OpenAIHandler(BaseHTTPRequestHandler):
    server_state: FakeOpenAI
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        return None

    def do_POST(self) -> None:  # noqa: N802
        state = self.server_state
        request = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        state.requests.append({"headers": dict(self.headers), "body": request})
        if request.get("stream"):
            self._stream(state, request)
        else:
            time.sleep(state.ttft_s)
            self._json(state.completion(request))

    def _json(self, payload: dict[str, Any]) -> None:
        body = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _stream(self, state: FakeOpenAI, request: dict[str, Any]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        for delay, chunk in state.chunks(request):
            time.sleep(delay)
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


class FakeOpenAI(_Server):
    """OpenAI-compatible chat completions with scripted timing; ``tokens`` words per answer."""

    handler = _OpenAIHandler
    PROMPT_TOKENS = 42
    CACHED_TOKENS = 16

    def __init__(self, ttft_s: float = 0.15, token_s: float = 0.03, tokens: int = 6) -> None:
        super().__init__()
        self.ttft_s, self.token_s, self.tokens = ttft_s, token_s, tokens
        self.requests: list[dict[str, Any]] = []

    def _usage(self, completion_tokens: int) -> dict[str, Any]:
        return {
            "prompt_tokens": self.PROMPT_TOKENS,
            "completion_tokens": completion_tokens,
            "total_tokens": self.PROMPT_TOKENS + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": self.CACHED_TOKENS},
        }

    def completion(self, request: dict[str, Any]) -> dict[str, Any]:
        if request.get("tools"):
            message = {"role": "assistant", "content": None, "tool_calls": [_tool_call(request)]}
            finish = "tool_calls"
        else:
            message = {"role": "assistant", "content": " ".join(["word"] * self.tokens)}
            finish = "stop"
        return {
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": self._usage(self.tokens),
        }

    def chunks(self, request: dict[str, Any]) -> list[tuple[float, dict[str, Any]]]:
        """(delay before it, chunk) pairs: a role chunk at once, tokens, finish, usage."""
        model = request["model"]
        out = [(0.0, _chunk(model, {"role": "assistant", "content": ""}))]
        if request.get("tools"):
            call = _tool_call(request)
            arguments = call["function"]["arguments"]
            first = {
                "index": 0,
                "id": call["id"],
                "type": "function",
                "function": {"name": call["function"]["name"], "arguments": ""},
            }
            out.append((self.ttft_s, _chunk(model, {"tool_calls": [first]})))
            pieces = [arguments[i : i + 8] for i in range(0, len(arguments), 8)]
            for piece in pieces:
                out.append(
                    (self.token_s, _chunk(model, {"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}))
                )
            finish, produced = "tool_calls", 1 + len(pieces)
        else:
            for i in range(self.tokens):
                out.append((self.ttft_s if i == 0 else self.token_s, _chunk(model, {"content": "word "})))
            finish, produced = "stop", self.tokens
        out.append((0.0, _chunk(model, {}, finish)))
        if (request.get("stream_options") or {}).get("include_usage"):
            out.append((0.0, {**_chunk(model, {}), "choices": [], "usage": self._usage(produced)}))
        return out


def _tool_call(request: dict[str, Any]) -> dict[str, Any]:
    name = request["tools"][0]["function"]["name"]
    return {
        "id": "call_1",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps({"query": "kv cache paging"})},
    }


def _chunk(model: str, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
