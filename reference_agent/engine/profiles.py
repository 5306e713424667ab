"""Model profiles of the simulated engine: how long one engine step takes.

One engine step decodes one token for every running sequence and computes the prompt tokens
of the sequences admitted in that step that the prefix cache did not hold::

    step_s = (decode_base_ms + decode_per_seq_ms * batch_size) / 1e3
             + prefill_per_token_us * uncached_prompt_tokens / 1e6

``decode_base_ms`` is the cost of reading the weights once per step (decoding is
memory-bandwidth bound, so a bigger batch is almost free per sequence), ``decode_per_seq_ms``
the extra attention/KV reads per sequence, ``prefill_per_token_us`` the compute-bound cost of
a prompt token. ``sim-large`` is about 4x slower per step and 4-6x slower per prompt token
than ``sim-small``, so routing easy calls to the small model makes them faster (and the SDK's
price table makes them cheaper). The figures are illustrative, of the order of a 7B and a
70B model on one modern GPU; this is a simulation.
"""

from __future__ import annotations

from dataclasses import dataclass


class UnknownModelError(KeyError):
    """The requested model is not one of the simulated profiles."""


@dataclass(frozen=True)
class ModelProfile:
    """Step-time parameters of one simulated model."""

    name: str
    decode_base_ms: float
    decode_per_seq_ms: float
    prefill_per_token_us: float
    max_model_len: int
    description: str

    def step_seconds(self, batch_size: int, prefill_tokens: int) -> float:
        """Duration of one engine step with ``batch_size`` sequences and ``prefill_tokens`` to compute."""
        if batch_size <= 0 and prefill_tokens <= 0:
            return 0.0
        decode_ms = self.decode_base_ms + self.decode_per_seq_ms * batch_size
        return decode_ms / 1e3 + self.prefill_per_token_us * prefill_tokens / 1e6


PROFILES: dict[str, ModelProfile] = {
    "sim-small": ModelProfile(
        name="sim-small",
        decode_base_ms=8.0,
        decode_per_seq_ms=0.15,
        prefill_per_token_us=40.0,
        max_model_len=32768,
        description="simulated small model (about a 7B model on one GPU); a simulation, not a model",
    ),
    "sim-large": ModelProfile(
        name="sim-large",
        decode_base_ms=30.0,
        decode_per_seq_ms=0.6,
        prefill_per_token_us=200.0,
        max_model_len=32768,
        description="simulated large model (about a 70B model on one GPU node); a simulation, not a model",
    ),
}


def get_profile(name: str) -> ModelProfile:
    """The profile called ``name``; raises ``UnknownModelError`` naming the known ones."""
    try:
        return PROFILES[name]
    except KeyError:
        raise UnknownModelError(f"unknown simulated model {name!r}; known: {', '.join(PROFILES)}") from None
