"""Prices per model, shared by the SDK (run cost, budgets) and the collector (every span).

Lookup order for a model: the user's overrides, the built-in illustrative prices of the
simulated models (``sim-small``, ``sim-large``), then the maintained ``genai-prices`` data for
hosted models. A model found nowhere costs 0.0 and is counted (``unknown_models``).
Each (model, provider) is resolved once into per-million-token prices and cached, so a
lookup after the first is a dict hit and some arithmetic.

``input_tokens`` includes ``cached_tokens`` (the OpenAI convention): cost =
(input - cached) x input price + cached x cached price + output x output price.

Overrides file (JSON or YAML), prices in USD per 1M tokens::

    models:
      my-finetune: {input: 0.5, output: 1.5, cached: 0.25}
      llama-3-70b-selfhosted: {gpu_hour_usd: 2.5, tokens_per_second: 1500}

A self-hosted entry is priced from GPU time: one token costs
``gpu_hour_usd / 3600 / tokens_per_second`` (``input_tokens_per_second`` may set a faster
prefill rate; cached tokens cost ``cached`` per 1M if given, else nothing, since a prefix
cache hit needs no prefill).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Mapping
from decimal import Decimal
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as package_version
from pathlib import Path
from typing import NamedTuple

from ._stats import COUNTERS, logger

PER_MILLION = 1_000_000
_MAX_CACHED = 4096  # distinct (model, provider) pairs; a flood of made-up names cannot grow memory
_PROBE_TOKENS = 1000  # small enough to stay below long-context price tiers


class Price(NamedTuple):
    """USD per 1M tokens, and where the figure came from."""

    input: float
    output: float
    cached: float
    source: str  # override | builtin | genai-prices | self-hosted


BUILTIN_PRICES: dict[str, Price] = {
    # Illustrative prices of the reference stack's simulated models (not real offers).
    "sim-small": Price(0.10, 0.40, 0.05, "builtin"),
    "sim-large": Price(2.50, 10.00, 1.25, "builtin"),
}


class PriceTable:
    """Cost of LLM calls by model; fast, thread-safe, and versioned by content."""

    def __init__(self, overrides: Mapping[str, Mapping[str, float]] | None = None, *, hosted: bool = True) -> None:
        self._overrides = {name.lower(): _parse_entry(name, entry) for name, entry in (overrides or {}).items()}
        self._hosted = hosted
        self._cache: dict[tuple[str, str | None], Price | None] = {}
        self._unknown: set[str] = set()
        self._lock = threading.Lock()
        self.version = self._compute_version()

    @classmethod
    def from_file(cls, path: str | Path, **kwargs: bool) -> PriceTable:
        """Load overrides from a JSON or YAML file (``models:`` mapping, or the mapping itself)."""
        return cls(load_overrides(path), **kwargs)

    def cost(
        self, model: str, input_tokens: int, output_tokens: int, cached_tokens: int = 0, provider: str | None = None
    ) -> float:
        """USD for one call; 0.0 (and counted) when the model has no price."""
        price = self.price(model, provider)
        if price is None:
            return 0.0
        cached = min(max(cached_tokens, 0), max(input_tokens, 0))
        return (
            (input_tokens - cached) * price.input + cached * price.cached + output_tokens * price.output
        ) / PER_MILLION

    def price(self, model: str, provider: str | None = None) -> Price | None:
        key = (model, provider)
        try:
            price = self._cache[key]
        except KeyError:
            if len(self._cache) >= _MAX_CACHED:
                self._cache.clear()
            price = self._cache[key] = self._resolve(model, provider)
        if price is None:
            self._note_unknown(model)
        return price

    @property
    def unknown_models(self) -> frozenset[str]:
        with self._lock:
            return frozenset(self._unknown)

    def _note_unknown(self, model: str) -> None:
        COUNTERS.add("unknown_models")
        with self._lock:
            if model not in self._unknown and len(self._unknown) < _MAX_CACHED:
                self._unknown.add(model)
                logger.info("agentwatch: no price for model %r; its cost counts as 0.0", model)

    def _resolve(self, model: str, provider: str | None) -> Price | None:
        name = model.strip().lower()
        if not name:
            return None
        found = self._overrides.get(name) or BUILTIN_PRICES.get(name)
        if found is None and self._hosted:
            found = _hosted_price(name, provider)
        if found is None and "/" in name:
            found = self._prefixed(name, provider)
        return found

    def _prefixed(self, name: str, provider: str | None) -> Price | None:
        """``openai/gpt-4o-mini`` (OpenRouter, LiteLLM, an OpenAI-compatible gateway): the bare
        model's price when the prefix is the call's provider or one genai-prices knows; an
        organisation prefix (``meta-llama/...``, self-hosted weights) stays unpriced."""
        prefix, bare = name.split("/", 1)
        if not bare:
            return None
        own = provider is not None and prefix == provider.strip().lower()
        found = self._overrides.get(bare) or BUILTIN_PRICES.get(bare) if own else None
        if found is None and self._hosted:
            found = _hosted_price(bare, prefix, any_provider=own or provider is None)
        return found

    def _compute_version(self) -> str:
        """Changes whenever an effective price can change: overrides, built-ins, data release."""
        payload = {
            "genai-prices": _genai_prices_version() if self._hosted else None,
            "builtin": {k: list(v) for k, v in sorted(BUILTIN_PRICES.items())},
            "overrides": {k: list(v) for k, v in sorted(self._overrides.items())},
        }
        digest = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
        return digest[:16]


def _genai_prices_version() -> str:
    try:
        return package_version("genai-prices")
    except PackageNotFoundError:
        return "absent"


def _hosted_price(name: str, provider: str | None, *, any_provider: bool = True) -> Price | None:
    """Linear per-1M prices from genai-prices, probed once with a small usage: the provider's,
    else (``any_provider``) the model's under any provider."""
    for provider_id in dict.fromkeys((provider, None) if any_provider else (provider,)):
        try:
            return Price(
                _probe(name, provider_id, input_tokens=_PROBE_TOKENS),
                _probe(name, provider_id, output_tokens=_PROBE_TOKENS),
                _probe(name, provider_id, input_tokens=_PROBE_TOKENS, cache_read_tokens=_PROBE_TOKENS),
                "genai-prices",
            )
        except LookupError:
            continue
        except Exception as exc:  # a data quirk of one model must not break pricing of others
            logger.info("agentwatch: genai-prices failed for %r: %r", name, exc)
            return None
    return None


def _probe(name: str, provider_id: str | None, **usage: int) -> float:
    """USD per 1M tokens for one kind of usage; LookupError when genai-prices lacks the model."""
    try:
        from genai_prices import Usage, calc_price
    except ImportError:
        raise LookupError("genai-prices is not installed") from None
    result = calc_price(Usage(**usage), name, provider_id=provider_id)
    return float(Decimal(result.total_price) * PER_MILLION / _PROBE_TOKENS)


def load_overrides(path: str | Path) -> dict[str, Mapping[str, float]]:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ValueError(f"prices file {path}: cannot read it: {exc}") from None
    data = _parse_document(path, text)
    models = data.get("models", data) if isinstance(data, dict) else None
    if not isinstance(models, dict):
        raise ValueError(f"prices file {path}: expected a mapping of model name to prices")
    return models


def _parse_document(path: Path, text: str) -> object:
    try:
        if path.suffix.lower() in (".yaml", ".yml"):
            try:
                import yaml
            except ImportError:
                raise ValueError(
                    f"prices file {path}: YAML needs PyYAML (pip install pyyaml), or write the file as JSON"
                ) from None
            return yaml.safe_load(text)
        return json.loads(text)
    except ValueError as exc:
        raise ValueError(f"prices file {path}: not valid {path.suffix or 'JSON'}: {exc}") from None


_PRICE_KEYS = {"input", "output", "cached", "gpu_hour_usd", "tokens_per_second", "input_tokens_per_second"}


def _parse_entry(model: str, entry: Mapping[str, float]) -> Price:
    if not isinstance(entry, Mapping):
        raise ValueError(f"price of {model!r}: expected a mapping, got {entry!r}")
    unknown = set(entry) - _PRICE_KEYS
    if unknown:
        raise ValueError(f"price of {model!r}: unknown keys {sorted(unknown)}; allowed: {sorted(_PRICE_KEYS)}")
    values = {key: _number(model, key, value) for key, value in entry.items()}
    if "gpu_hour_usd" in values:
        return _self_hosted(model, values)
    if "input" not in values or "output" not in values:
        raise ValueError(
            f"price of {model!r}: needs 'input' and 'output' (USD per 1M tokens), "
            "or 'gpu_hour_usd' and 'tokens_per_second'"
        )
    return Price(values["input"], values["output"], values.get("cached", values["input"]), "override")


def _self_hosted(model: str, values: dict[str, float]) -> Price:
    tps = values.get("tokens_per_second", 0.0)
    if tps <= 0:
        raise ValueError(f"price of {model!r}: a self-hosted model needs tokens_per_second > 0")
    usd_per_second = values["gpu_hour_usd"] / 3600
    output = usd_per_second / tps * PER_MILLION
    input_tps = values.get("input_tokens_per_second", tps)
    input_price = usd_per_second / input_tps * PER_MILLION if input_tps > 0 else output
    return Price(input_price, output, values.get("cached", 0.0), "self-hosted")


def _number(model: str, key: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ValueError(f"price of {model!r}: {key} must be a non-negative number, got {value!r}")
    return float(value)
