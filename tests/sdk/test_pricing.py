"""The price table: built-ins, genai-prices, overrides files, self-hosted GPU pricing, versions."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import agentwatch
import pytest
from agentwatch import PriceTable


def test_simulated_models_have_the_documented_illustrative_prices() -> None:
    table = PriceTable()
    assert table.cost("sim-small", 1_000_000, 0) == pytest.approx(0.10)
    assert table.cost("sim-small", 0, 1_000_000) == pytest.approx(0.40)
    assert table.cost("sim-large", 1_000_000, 1_000_000) == pytest.approx(12.50)
    # cached input tokens are part of input_tokens and cost half the input price
    assert table.cost("sim-large", 1_000_000, 0, cached_tokens=1_000_000) == pytest.approx(1.25)
    assert table.cost("SIM-SMALL", 1_000_000, 0) == pytest.approx(0.10)


def test_hosted_models_come_from_genai_prices() -> None:
    from genai_prices import Usage, calc_price

    table = PriceTable()
    expected = float(calc_price(Usage(input_tokens=1000, output_tokens=500), "gpt-4o").total_price)
    assert table.cost("gpt-4o", 1000, 500) == pytest.approx(expected)
    assert table.cost("gpt-4o", 1000, 500, provider="openai") == pytest.approx(expected)
    assert table.cost("openai/gpt-4o", 1000, 500) == pytest.approx(expected)
    assert table.price("gpt-4o").source == "genai-prices"  # type: ignore[union-attr]
    # an engine we do not know as a provider still prices a known model
    assert table.cost("gpt-4o", 1000, 500, provider="vllm") == pytest.approx(expected)


@pytest.mark.parametrize(
    "model, provider",
    [
        ("openai/gpt-4o-mini", "openai"),  # gen_ai.system=openai with a gateway's model id
        ("OpenAI/gpt-4o-mini", "openai"),
        ("openai/gpt-4o-mini", None),
        ("openai/gpt-4o-mini", "vllm"),  # the prefix names a provider genai-prices knows
    ],
)
def test_a_provider_prefixed_model_is_priced_as_the_bare_model(model: str, provider: str | None) -> None:
    table = PriceTable()
    assert table.cost(model, 1000, 500, 200, provider=provider) == pytest.approx(
        table.cost("gpt-4o-mini", 1000, 500, 200, provider="openai")
    )
    assert table.cost(model, 1000, 500, provider=provider) > 0


def test_a_prefix_that_is_the_provider_finds_overrides_and_builtins() -> None:
    table = PriceTable({"my-finetune": {"input": 1.0, "output": 2.0}})
    assert table.cost("openai/my-finetune", 1_000_000, 0, provider="openai") == pytest.approx(1.0)
    assert table.cost("openai/sim-small", 1_000_000, 0, provider="openai") == pytest.approx(0.10)
    assert table.cost("vllm/sim-small", 1_000_000, 0, provider="openai") == 0.0  # not the call's provider


def test_an_organisation_prefix_is_not_stripped() -> None:
    """Self-hosted weights (``meta-llama/...`` served by vLLM) have no list price: GPU time, by override."""
    table = PriceTable()
    assert table.price("meta-llama/Llama-3.1-8B-Instruct", "openai") is None
    assert table.price("openai/", "openai") is None


def test_unknown_model_costs_zero_and_is_counted() -> None:
    table = PriceTable()
    before = agentwatch.stats()["unknown_models"]
    assert table.cost("no-such-model-xyz", 1000, 1000) == 0.0
    assert table.cost("no-such-model-xyz", 1000, 1000) == 0.0
    assert agentwatch.stats()["unknown_models"] - before == 2
    assert table.unknown_models == {"no-such-model-xyz"}


def test_overrides_file_and_self_hosted(tmp_path: Path) -> None:
    doc = {
        "models": {
            "my-ft": {"input": 1.0, "output": 3.0},
            "sim-small": {"input": 9.0, "output": 9.0, "cached": 0.0},
            "llama-70b": {"gpu_hour_usd": 3.6, "tokens_per_second": 1000},
        }
    }
    json_file = tmp_path / "prices.json"
    json_file.write_text(json.dumps(doc))
    table = PriceTable.from_file(json_file)
    assert table.cost("my-ft", 1_000_000, 1_000_000) == pytest.approx(4.0)
    assert table.cost("my-ft", 1_000_000, 0, cached_tokens=500_000) == pytest.approx(1.0)  # cached = input
    assert table.cost("sim-small", 1_000_000, 0) == pytest.approx(9.0)  # overrides win over built-ins
    # $3.6/h at 1000 tokens/s = $1 per 1M tokens; prefix-cache hits cost nothing
    assert table.cost("llama-70b", 1_000_000, 1_000_000, cached_tokens=1_000_000) == pytest.approx(1.0)


def test_a_yaml_overrides_file_is_read_with_pyyaml_or_refused_clearly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PyYAML is optional for the SDK (the platform installs it): without it a YAML file is a clear error."""
    yaml_file = tmp_path / "prices.yaml"
    yaml_file.write_text("models:\n  my-ft: {input: 1.0, output: 3.0}\n")
    if importlib.util.find_spec("yaml") is not None:
        assert PriceTable.from_file(yaml_file).cost("my-ft", 0, 1_000_000) == pytest.approx(3.0)
    monkeypatch.setitem(sys.modules, "yaml", None)  # as if not installed
    with pytest.raises(ValueError, match="YAML needs PyYAML"):
        PriceTable.from_file(yaml_file)


def test_version_changes_with_the_effective_prices() -> None:
    base = PriceTable().version
    assert PriceTable().version == base
    assert PriceTable({"x": {"input": 1, "output": 2}}).version != base
    assert PriceTable({"x": {"input": 1, "output": 3}}).version != PriceTable({"x": {"input": 1, "output": 2}}).version


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not valid"),
        ('{"m": {"input": 1}}', "needs 'input' and 'output'"),
        ('{"m": {"input": -1, "output": 1}}', "non-negative"),
        ('{"m": {"inptu": 1, "output": 1}}', "unknown keys"),
        ('{"m": {"gpu_hour_usd": 2}}', "tokens_per_second"),
        ("[1, 2]", "mapping of model name"),
    ],
)
def test_bad_overrides_say_what_is_wrong(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "prices.json"
    path.write_text(content)
    with pytest.raises(ValueError, match=message):
        PriceTable.from_file(path)
    with pytest.raises(ValueError, match="cannot read"):
        PriceTable.from_file(tmp_path / "missing.json")


def test_init_uses_the_prices_file_for_run_cost(tmp_path: Path) -> None:
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"house-model": {"input": 10.0, "output": 0.0}}))
    agentwatch.init(prices_file=str(path), endpoint="http://127.0.0.1:9", instrument_openai=False)
    with agentwatch.run("r") as run, agentwatch.llm(model="house-model") as call:
        call.record_usage(input_tokens=100_000, output_tokens=5)
    assert run.cost_usd == pytest.approx(1.0)
