"""The public surface is deliberate, and installing the SDK stays light."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import agentwatch

SDK = Path(__file__).resolve().parents[2] / "sdk"
HEAVY = {"fastapi", "chdb", "chdb-core", "streamlit", "pandas", "vllm", "numpy", "clickhouse-connect", "uvicorn"}

PUBLIC = [
    "ENVIRONMENT_VARIABLES",
    "AgentwatchError",
    "Budget",
    "BudgetExceeded",
    "BudgetLeft",
    "Price",
    "PriceTable",
    "Run",
    "__version__",
    "current_run",
    "feedback",
    "force_flush",
    "init",
    "instrument_openai",
    "lever_attributes",
    "llm",
    "llm_attributes",
    "record_lever",
    "redact_text",
    "run",
    "shutdown",
    "stats",
    "step",
    "tool",
    "uninstrument_openai",
]


def test_all_is_pinned() -> None:
    assert sorted(agentwatch.__all__) == sorted(PUBLIC)
    for name in PUBLIC:
        assert hasattr(agentwatch, name), name


def test_public_names_come_from_private_modules() -> None:
    """Besides ``__init__``, the public modules are contracts the platform shares: the attribute
    names (``semconv``), how an ``AGENTWATCH_*`` variable is read (``envconfig``) and the
    ``agentwatch`` command that the platform's parts plug their commands into (``cli``, ``__main__``)."""
    public = {"__init__", "__main__", "semconv", "envconfig", "cli"}
    modules = {p.stem for p in (SDK / "agentwatch").glob("*.py")} - public
    assert all(m.startswith("_") for m in modules), modules


def test_semconv_is_a_public_module_of_names() -> None:
    from agentwatch import semconv

    names = {k: v for k, v in vars(semconv).items() if k.isupper()}
    assert names["GEN_AI_REQUEST_MODEL"] == "gen_ai.request.model" and "AW_TTFT" in names
    assert all(isinstance(v, str | tuple) for v in names.values()), "semconv holds names, nothing else"


def test_stats_has_the_documented_counters() -> None:
    stats = agentwatch.stats()
    for key in (
        "spans_started",
        "spans_ended",
        "spans_exported",
        "spans_dropped",
        "spans_failed",
        "spans_pending",
        "export_failures",
        "internal_errors",
        "queue_size",
    ):
        assert isinstance(stats[key], int)


def _name(requirement: str) -> str:
    for sep in "<>=!~[; ":
        requirement = requirement.split(sep)[0]
    return requirement.lower().replace("_", "-")


def test_declared_dependencies_are_light() -> None:
    project = tomllib.loads((SDK / "pyproject.toml").read_text())["project"]
    declared = {_name(r) for r in project["dependencies"]}
    assert declared and not declared & HEAVY


def test_real_install_resolution_pulls_nothing_heavy(tmp_path: Path) -> None:
    """What ``pip install ./sdk`` would install into an empty environment (resolved, not installed)."""
    report = tmp_path / "report.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--dry-run",
            "--quiet",
            "--ignore-installed",
            "--report",
            str(report),
            str(SDK),
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    installed = {_name(item["metadata"]["name"]) for item in json.loads(report.read_text())["install"]}
    assert "agentwatch" in installed and "opentelemetry-sdk" in installed
    assert not installed & HEAVY, installed & HEAVY
