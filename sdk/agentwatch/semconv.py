"""Every span attribute name agentwatch writes or reads, in one place: a public contract.

    from agentwatch import semconv
    span.set_attribute(semconv.AW_TOOL_CACHE_HIT, True)

Names follow the OpenTelemetry GenAI semantic conventions (``gen_ai.*``); what those lack
(TTFT, TPOT, cost, budget, step index, outcome) lives under ``agentwatch.*``. The SDK writes
these names, the collector normalises spans by them, and the dashboard, the alerts and the
reference stack read them, so no part keeps a copy. Durations are seconds (floats), costs
US dollars, token counts integers.

Versioned with the SDK like its functions: adding a name is a minor change; renaming or
removing one (or changing what its value means) is a breaking change that spans already
stored in a collector will not follow.
"""

from __future__ import annotations

# --- span kinds (agentwatch.span.kind) -------------------------------------------------
KIND_RUN = "run"
KIND_STEP = "step"
KIND_LLM = "llm"
KIND_TOOL = "tool"
KIND_RETRIEVAL = "retrieval"
KIND_OTHER = "other"
SPAN_KINDS = (KIND_RUN, KIND_STEP, KIND_LLM, KIND_TOOL, KIND_RETRIEVAL, KIND_OTHER)
# The inference engine's own record of an LLM call (vLLM's ``llm_request`` span): set by the
# collector, never by a client; its tokens count once, through the client's LLM span it joins.
KIND_ENGINE = "engine"

AGENTWATCH_SPAN_KIND = "agentwatch.span.kind"

# --- OpenTelemetry GenAI conventions ----------------------------------------------------
GEN_AI_OPERATION_NAME = "gen_ai.operation.name"
OP_INVOKE_AGENT = "invoke_agent"
OP_CHAT = "chat"
OP_TEXT_COMPLETION = "text_completion"
OP_EXECUTE_TOOL = "execute_tool"
OP_EMBEDDINGS = "embeddings"

GEN_AI_PROVIDER_NAME = "gen_ai.provider.name"
GEN_AI_SYSTEM = "gen_ai.system"  # older name of the provider
GEN_AI_AGENT_NAME = "gen_ai.agent.name"
GEN_AI_AGENT_ID = "gen_ai.agent.id"
GEN_AI_CONVERSATION_ID = "gen_ai.conversation.id"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_RESPONSE_MODEL = "gen_ai.response.model"
GEN_AI_RESPONSE_ID = "gen_ai.response.id"
GEN_AI_RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
GEN_AI_REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
GEN_AI_REQUEST_TEMPERATURE = "gen_ai.request.temperature"
GEN_AI_USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS = "gen_ai.usage.cache_read.input_tokens"
GEN_AI_USAGE_PROMPT_TOKENS = "gen_ai.usage.prompt_tokens"  # older name
GEN_AI_USAGE_COMPLETION_TOKENS = "gen_ai.usage.completion_tokens"  # older name
GEN_AI_TOOL_NAME = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID = "gen_ai.tool.call.id"
GEN_AI_TOOL_TYPE = "gen_ai.tool.type"
GEN_AI_TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_CALL_RESULT = "gen_ai.tool.call.result"
GEN_AI_INPUT_MESSAGES = "gen_ai.input.messages"
GEN_AI_OUTPUT_MESSAGES = "gen_ai.output.messages"
ERROR_TYPE = "error.type"
USER_ID = "user.id"
SESSION_ID = "session.id"
# The agent's version: OpenTelemetry's resource attribute; the SDK also sets it on a run's spans when
# the run names its own version (agentwatch.run(version=...)), which wins over the resource's.
SERVICE_VERSION = "service.version"

# vLLM's own server spans (name "llm_request")
VLLM_SPAN_NAME = "llm_request"
GEN_AI_REQUEST_ID = "gen_ai.request.id"
GEN_AI_LATENCY_TIME_IN_QUEUE = "gen_ai.latency.time_in_queue"
GEN_AI_LATENCY_TIME_TO_FIRST_TOKEN = "gen_ai.latency.time_to_first_token"
GEN_AI_LATENCY_E2E = "gen_ai.latency.e2e"
GEN_AI_LATENCY_TIME_IN_SCHEDULER = "gen_ai.latency.time_in_scheduler"
GEN_AI_LATENCY_TIME_IN_MODEL_FORWARD = "gen_ai.latency.time_in_model_forward"
GEN_AI_LATENCY_TIME_IN_MODEL_EXECUTE = "gen_ai.latency.time_in_model_execute"
GEN_AI_LATENCY_TIME_IN_MODEL_PREFILL = "gen_ai.latency.time_in_model_prefill"
GEN_AI_LATENCY_TIME_IN_MODEL_DECODE = "gen_ai.latency.time_in_model_decode"
GEN_AI_LATENCY_TIME_IN_MODEL_INFERENCE = "gen_ai.latency.time_in_model_inference"
GEN_AI_REQUEST_N = "gen_ai.request.n"
# Client-side stream latency, seconds: the newer GenAI name, and openlit's (which records a
# non-streamed call's whole duration as its TTFT, and 0 as its TPOT).
GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK = "gen_ai.response.time_to_first_chunk"
GEN_AI_SERVER_TIME_TO_FIRST_TOKEN = "gen_ai.server.time_to_first_token"
GEN_AI_SERVER_TIME_PER_OUTPUT_TOKEN = "gen_ai.server.time_per_output_token"
GEN_AI_REQUEST_STREAM = "gen_ai.request.stream"  # openlit: bool
GEN_AI_REQUEST_TOP_P = "gen_ai.request.top_p"

# --- OpenInference (Arize Phoenix) --------------------------------------------------------
OPENINFERENCE_SPAN_KIND = "openinference.span.kind"  # LLM, TOOL, CHAIN, AGENT, RETRIEVER, ...
LLM_MODEL_NAME = "llm.model_name"
LLM_TOKEN_COUNT_PROMPT = "llm.token_count.prompt"
LLM_TOKEN_COUNT_COMPLETION = "llm.token_count.completion"
LLM_TOKEN_COUNT_TOTAL = "llm.token_count.total"
LLM_TOKEN_COUNT_CACHE_READ = "llm.token_count.prompt_details.cache_read"
LLM_PROVIDER = "llm.provider"
LLM_SYSTEM = "llm.system"
TOOL_NAME = "tool.name"
INPUT_VALUE = "input.value"
OUTPUT_VALUE = "output.value"
OI_SESSION_ID = "session.id"
OI_USER_ID = "user.id"
OI_AGENT_NAME = "agent.name"
OI_FIRST_TOKEN_EVENT = "First Token Stream Event"  # span event at a stream's first chunk

# --- OpenLLMetry (Traceloop) --------------------------------------------------------------
TRACELOOP_SPAN_KIND = "traceloop.span.kind"  # workflow, task, agent, tool
TRACELOOP_ENTITY_NAME = "traceloop.entity.name"
# The enclosing workflow's name, or the enclosing @agent's (every span under it carries it).
TRACELOOP_WORKFLOW_NAME = "traceloop.workflow.name"
# The chain of enclosing tasks/tools ("outer.inner"); absent outside any task or tool.
TRACELOOP_ENTITY_PATH = "traceloop.entity.path"
TRACELOOP_CHUNK_EVENT = "llm.content.completion.chunk"  # span event at every streamed chunk
LLM_USAGE_CACHE_READ_INPUT_TOKENS = "gen_ai.usage.cache_read_input_tokens"
LLM_USAGE_PROMPT_TOKENS = "llm.usage.prompt_tokens"
LLM_USAGE_COMPLETION_TOKENS = "llm.usage.completion_tokens"
LLM_USAGE_TOTAL_TOKENS = "llm.usage.total_tokens"
LLM_REQUEST_TYPE = "llm.request.type"

# --- agentwatch extensions ----------------------------------------------------------------
AW_PROJECT = "agentwatch.project"  # resource attribute; the collector trusts the API key
AW_SDK_VERSION = "agentwatch.sdk.version"  # resource attribute: version of the SDK that sent the span
AW_TTFT = "agentwatch.llm.ttft"  # seconds, first content or tool-call chunk
AW_TPOT = "agentwatch.llm.tpot"  # seconds per output token after the first
AW_STREAMING = "agentwatch.llm.streaming"
AW_COST_USD = "agentwatch.cost.usd"  # SDK-side estimate; the collector re-prices
AW_PRICE_VERSION = "agentwatch.cost.price_version"
AW_STEP_INDEX = "agentwatch.step.index"  # 0-based index of the step/LLM call within its run
AW_STEP_NAME = "agentwatch.step.name"
AW_RUN_TAGS = "agentwatch.run.tags"  # string array
# A zero-length child span sent when a run starts (its root span is exported only when it ends),
# so a backend can list the run while it runs; any OTel backend reads it as a plain span.
AW_RUN_START = "agentwatch.run.start"  # bool; also the marker span's name
AW_RUN_NAME = "agentwatch.run.name"  # on the marker: the name of the run span it announces
AW_RUN_OUTCOME = "agentwatch.run.outcome"  # success | failure | abandoned | refused
AW_RUN_OUTCOME_REASON = "agentwatch.run.outcome_reason"
AW_RUN_STEPS = "agentwatch.run.steps"
AW_RUN_LLM_CALLS = "agentwatch.run.llm_calls"
AW_RUN_TOOL_CALLS = "agentwatch.run.tool_calls"
AW_RUN_COST_USD = "agentwatch.run.cost_usd"
AW_BUDGET_MAX_COST_USD = "agentwatch.budget.max_cost_usd"
AW_BUDGET_MAX_STEPS = "agentwatch.budget.max_steps"
AW_BUDGET_MAX_SECONDS = "agentwatch.budget.max_seconds"
AW_BUDGET_EXCEEDED = "agentwatch.budget.exceeded"  # the limit that stopped the run: cost|steps|seconds
AW_TIMEOUT = "agentwatch.timeout"  # bool: the call failed by timing out (distinct from errors)
AW_TOOL_CACHE_HIT = "agentwatch.tool.cache_hit"  # bool
AW_TOOL_TOKENS_SAVED = "agentwatch.tool.tokens_saved"  # tokens a cache hit avoided
AW_MODEL_TIER = "agentwatch.llm.model_tier"  # small | large: which model a router chose
AW_ERROR_STACK = "exception.stacktrace"

# Cost levers (agentwatch.lever.*): a decision an agent took to spend less, recorded on the span
# where it took effect (``agentwatch.record_lever`` / ``lever_attributes``). The collector prices
# each lever's counterfactual from these: routing prices the call's tokens on ``baseline_model``;
# degradation compares ``projected_cost_usd`` (the run's projected cost at the switch) with the
# run's final cost; rate limiting counts ``delay_s`` and ``refused`` requests at their
# ``projected_cost_usd`` (an estimate of the refused run's cost).
AW_LEVER = "agentwatch.lever.name"  # cache | routing | rate_limit | degradation
AW_LEVER_REASON = "agentwatch.lever.reason"  # why, in words ("budget 82% spent", "engine queue 1.4 s")
AW_LEVER_CHANGE = "agentwatch.lever.change"  # what it changed ("sim-large -> sim-small", "max_steps 12 -> 4")
AW_LEVER_BASELINE_MODEL = "agentwatch.lever.baseline_model"  # the model the call would have used
AW_LEVER_PROJECTED_COST_USD = "agentwatch.lever.projected_cost_usd"
AW_LEVER_COST_SO_FAR_USD = "agentwatch.lever.cost_so_far_usd"  # the run's cost when it decided
AW_LEVER_DELAY_S = "agentwatch.lever.delay_s"  # rate_limit: seconds the request waited
AW_LEVER_REFUSED = "agentwatch.lever.refused"  # rate_limit: bool, the request was refused
AW_RUN_DEGRADED = "agentwatch.run.degraded"  # bool on the run span: a degradation lever acted in it
LEVERS = ("cache", "routing", "rate_limit", "degradation")

# ``refused``: the request was turned away before any work (a rate limit, a budget): not a run. The
# collector counts it on its own and keeps it out of run counts, latency, success rates, medians and
# alert baselines; it also reads ``abandoned`` with ``agentwatch.lever.refused`` (older SDKs) so.
OUTCOME_REFUSED = "refused"
OUTCOMES = ("success", "failure", "abandoned", OUTCOME_REFUSED)
