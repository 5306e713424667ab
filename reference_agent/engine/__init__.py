"""The simulated LLM engine (a simulation, not a model) and the vLLM launcher.

The simulated engine is an OpenAI-compatible server that schedules requests the way vLLM does
(sequence slots, a KV-cache token budget in blocks of 16, prefill and decode steps, a prefix
cache, preemption by recompute, continuous or static batching) and answers from a
deterministic policy. Its Prometheus metrics and OTLP spans carry vLLM's own names, so the
collector treats it exactly like a real vLLM server.
"""

from __future__ import annotations
