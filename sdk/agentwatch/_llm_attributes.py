"""``agentwatch.llm_attributes(...)``: attributes for the LLM spans opened inside a block.

The OpenAI instrumentation opens its LLM spans inside ``create()``, where the caller cannot
reach them; this is how an agent labels them (which tier a router chose, a prompt version)::

    with agentwatch.llm_attributes(model_tier="small"):
        client.chat.completions.create(...)   # its span has agentwatch.llm.model_tier="small"

Blocks nest (the inner value wins) and follow the code through ``await`` and into tasks it
starts (a ``ContextVar``). The attributes the SDK records itself (model, tokens, cost, ...)
always win over a block's. Arguments are checked at once: a bad name or value raises
``ValueError`` naming it, before the block runs.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Mapping
from types import MappingProxyType

from opentelemetry.util.types import AttributeValue

from . import semconv as sc

_PREFIX = sc.AW_MODEL_TIER.rsplit(".", 1)[0] + "."  # "agentwatch.llm."
_EMPTY: Mapping[str, object] = MappingProxyType({})
_CURRENT: contextvars.ContextVar[Mapping[str, object]] = contextvars.ContextVar(
    "agentwatch_llm_attributes", default=_EMPTY
)


@contextlib.contextmanager
def llm_attributes(
    attributes: Mapping[str, AttributeValue] | None = None, /, **short_names: AttributeValue
) -> Iterator[None]:
    """Add attributes to every LLM span agentwatch opens inside the block.

    Keyword names are agentwatch's LLM attributes (``model_tier`` becomes
    ``agentwatch.llm.model_tier``); other names go in the mapping, as they are
    (``{"team.name": "search"}``). Values are what OpenTelemetry accepts: str, bool, int,
    float, or a list of one of those types.
    """
    merged = {**_CURRENT.get(), **_checked(attributes or {}, prefix=""), **_checked(short_names, prefix=_PREFIX)}
    token = _CURRENT.set(MappingProxyType(merged))
    try:
        yield
    finally:
        _CURRENT.reset(token)


def current_llm_attributes() -> Mapping[str, object]:
    """The attributes of the enclosing ``llm_attributes`` blocks (read by the LLM span)."""
    return _CURRENT.get()


def _checked(attributes: Mapping[str, AttributeValue], *, prefix: str) -> dict[str, object]:
    checked: dict[str, object] = {}
    for name, value in attributes.items():
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"llm_attributes: attribute names must be non-empty strings, got {name!r}")
        checked[prefix + name] = _value(prefix + name, value)
    return checked


def _value(name: str, value: object) -> object:
    if isinstance(value, str | bool | int | float):
        return value
    if (
        isinstance(value, list | tuple)
        and len({type(v) for v in value}) <= 1
        and all(isinstance(v, str | bool | int | float) for v in value)
    ):
        return tuple(value)
    raise ValueError(
        f"llm_attributes: {name}={value!r}: expected str, bool, int, float or a list of one of those types"
    )
