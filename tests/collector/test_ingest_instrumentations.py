"""Spans from real third-party instrumentations (OpenTelemetry's openai-v2, OpenInference) of the
real OpenAI client, against a local OpenAI-compatible server, land with model and tokens."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import openai
import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from tests.collector.ingest_helpers import Running, run_spans, serve, settings_for


class _ChatCompletions(BaseHTTPRequestHandler):
    """The one endpoint the tests call, answering like an OpenAI-compatible server (a fake of
    something outside the machine)."""

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        body = json.dumps(
            {
                "id": "chatcmpl-local1",
                "object": "chat.completion",
                "created": 1700000000,
                "model": request["model"],
                "choices": [
                    {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Paris."}}
                ],
                "usage": {"prompt_tokens": 11, "completion_tokens": 5, "total_tokens": 16},
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        return None


@pytest.fixture(scope="module")
def llm_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ChatCompletions)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    thread.join(10)


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    with serve(settings_for(tmp_path_factory.mktemp("instr") / "data")) as running:
        yield running


def _openai_v2() -> Any:
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

    return OpenAIInstrumentor()


def _openinference() -> Any:
    from openinference.instrumentation.openai import OpenAIInstrumentor

    return OpenAIInstrumentor()


@pytest.mark.parametrize("make_instrumentor", [_openai_v2, _openinference], ids=["openai-v2", "openinference"])
def test_instrumented_openai_call_lands_with_model_and_tokens(
    collector: Running, llm_server: str, make_instrumentor: Callable[[], Any]
) -> None:
    key = collector.key("instrumented")
    provider = TracerProvider()
    provider.add_span_processor(
        SimpleSpanProcessor(
            OTLPSpanExporter(endpoint=collector.url + "/v1/traces", headers={"Authorization": f"Bearer {key}"})
        )
    )
    instrumentor = make_instrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        with provider.get_tracer("test").start_as_current_span("agent") as root:
            client = openai.OpenAI(base_url=llm_server, api_key="sk-test-not-a-real-key-000000")
            answer = client.chat.completions.create(
                model="sim-small", messages=[{"role": "user", "content": "Capital of France?"}]
            )
        assert answer.choices[0].message.content == "Paris."
    finally:
        instrumentor.uninstrument()
        provider.shutdown()
    spans = run_spans(collector.url, key, f"{root.get_span_context().trace_id:032x}", expect=2)
    llm = [s for s in spans if s["kind"] == "llm"]
    assert len(llm) == 1, spans
    assert llm[0]["model"] == "sim-small"
    assert (llm[0]["input_tokens"], llm[0]["output_tokens"]) == (11, 5)
    assert llm[0]["cost_usd"] == pytest.approx((11 * 0.10 + 5 * 0.40) / 1e6)
