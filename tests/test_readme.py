"""The README's configuration table lists every setting the code reads, and its quickstart is two commands."""

from __future__ import annotations

import re
from pathlib import Path

from agentwatch._config import VARIABLES

from agentwatch_platform.collector.settings import Settings
from agentwatch_platform.dashboard.config import DashboardConfig

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_configuration_table_lists_every_variable() -> None:
    names = (
        [v[0] for v in VARIABLES]
        + [n for n, _, _ in Settings.describe()]
        + [n for n, _, _ in DashboardConfig.describe()]
    )
    missing = [n for n in names if f"`{n}`" not in README]
    assert not missing, f"README configuration table lacks {missing}"


def test_quickstart_is_make_demo_and_make_test() -> None:
    block = re.search(r"## Quickstart.*?```bash\n(.*?)```", README, re.DOTALL)
    assert block is not None
    commands = [line.split("#")[0].strip() for line in block.group(1).splitlines() if line.strip()]
    assert commands == ["make demo", "make test"]
