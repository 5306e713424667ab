"""How a benchmark describes its machine and writes its figures (``<out>.json`` and ``<out>.md``)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any


def machine() -> str:
    """CPUs, platform and load now: figures from a shared machine say how busy it was."""
    return f"{os.cpu_count()} CPUs, {sys.platform}, load average {os.getloadavg()[0]:.1f} at start (shared machine)"


def write(out: Path, figures: dict[str, Any], markdown: str) -> None:
    """``figures`` as JSON and ``markdown`` beside it; also printed."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(figures, indent=2))
    out.with_suffix(".md").write_text(markdown)
    print(markdown)
