"""How many examples a property test draws: its own count, scaled by ``AGENTWATCH_TEST_EXAMPLES_SCALE``.

``make sanitize`` runs the native decoder's tests under AddressSanitizer with a fifth of the
examples: there the job is to take every C path under the sanitizer (a fifth of the examples
covers the same lines), while agreement with the Python path is the plain run's job, at full count.
"""

from __future__ import annotations

import os

SCALE_VAR = "AGENTWATCH_TEST_EXAMPLES_SCALE"


def examples(count: int) -> int:
    """``count`` times the scale (1 unless set), at least one."""
    raw = os.environ.get(SCALE_VAR, "1")
    try:
        scale = float(raw)
    except ValueError:
        raise ValueError(f"{SCALE_VAR}={raw!r}: expected a number such as 0.2") from None
    if not 0 < scale <= 1:
        raise ValueError(f"{SCALE_VAR}={raw!r}: expected a number in (0, 1]")
    return max(1, round(count * scale))
