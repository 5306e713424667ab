"""The README and docs/ say what the code does, and point only at what exists.

The quickstart is two commands; docs/configuration.md lists every variable the code reads and
names none it does not; every relative link in the README and docs/ resolves (to a file, and to a
heading where it names one); every repository path written in code font exists; every
``python -m bench.X`` names a runnable module of bench/. A page that drifts from the code fails
here instead of misleading its reader.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from agentwatch._config import VARIABLES

from agentwatch_platform.alerts.settings import AlertsSettings
from agentwatch_platform.collector.settings import Settings
from agentwatch_platform.dashboard.config import DashboardConfig

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
CONFIGURATION = ROOT / "docs" / "configuration.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
PAGE_IDS = [str(p.relative_to(ROOT)) for p in PAGES]

_FENCE = re.compile(r"^```.*?^```", re.DOTALL | re.MULTILINE)
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_CODE_PATH = re.compile(r"`((?:[\w.-]+/)+[\w.-]+\.(?:py|md|c|h|ya?ml|sql|txt|json|toml|lock))`")
_BENCH = re.compile(r"python -m bench\.([a-z_]+)")
_VARIABLE = re.compile(r"AGENTWATCH_[A-Z0-9_]*[A-Z0-9]")


def _prose(page: Path) -> str:
    """The page without its fenced code blocks (code is not a link, and `# comment` no heading)."""
    return _FENCE.sub("", page.read_text())


def _code_variables() -> set[str]:
    """Every variable the code reads: the SDK's, the collector's, the dashboard's settings, and the
    ``${AGENTWATCH_...}`` the default alert rules substitute."""
    rules = (ROOT / "alerts" / "default_rules.yaml").read_text()
    return (
        {v[0] for v in VARIABLES}
        | {n for n, _, _ in Settings.describe()}
        | {n for n, _, _ in AlertsSettings.describe()}  # the alerts plugin's, read by the collector
        | {n for n, _, _ in DashboardConfig.describe()}
        | set(re.findall(r"\$\{(AGENTWATCH_[A-Z0-9_]+)", rules))
    )


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    anchors = set()
    for heading in re.findall(r"^#+ (.+)$", _prose(page), re.MULTILINE):
        slug = _slug(heading)
        anchors.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return anchors


def test_quickstart_is_make_demo_and_make_test() -> None:
    block = re.search(r"## Quickstart.*?```bash\n(.*?)```", README.read_text(), re.DOTALL)
    assert block is not None
    commands = [line.split("#")[0].strip() for line in block.group(1).splitlines() if line.strip()]
    assert commands == ["make demo", "make test"]


def test_readme_stays_short() -> None:
    lines = README.read_text().count("\n")
    assert lines <= 250, f"README.md has {lines} lines: move the detail to docs/"


def test_configuration_lists_every_variable() -> None:
    text = CONFIGURATION.read_text()
    missing = sorted(n for n in _code_variables() if f"`{n}`" not in text)
    assert not missing, f"docs/configuration.md lacks {missing}"


def test_configuration_names_only_variables_the_code_reads() -> None:
    unknown = sorted(set(_VARIABLE.findall(CONFIGURATION.read_text())) - _code_variables())
    assert not unknown, f"docs/configuration.md names variables no settings read: {unknown}"


@pytest.mark.parametrize("page", PAGES, ids=PAGE_IDS)
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in _LINK.findall(_prose(page)):
        if re.match(r"[a-z]+:", target):
            continue  # http(s), mailto: not ours to check
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in _anchors(file):
            broken.append(f"{target}: no such heading")
    assert not broken, f"{page.name}: {broken}"


@pytest.mark.parametrize("page", PAGES, ids=PAGE_IDS)
def test_every_path_in_code_font_exists(page: Path) -> None:
    missing = sorted({p for p in _CODE_PATH.findall(_prose(page)) if not (ROOT / p).exists()})
    assert not missing, f"{page.name} names paths that do not exist: {missing}"


@pytest.mark.parametrize("page", PAGES, ids=PAGE_IDS)
def test_every_benchmark_command_is_a_module(page: Path) -> None:
    bad = []
    for name in sorted(set(_BENCH.findall(page.read_text()))):
        module = ROOT / "bench" / f"{name}.py"
        if not module.exists() or '__name__ == "__main__"' not in module.read_text():
            bad.append(f"bench.{name}")
    assert not bad, f"{page.name} names benchmarks that do not run: {bad}"
