"""The dashboard's server process: Streamlit's own command line, with the pages' heavy modules
imported before it serves and the collector's security headers on every response
(``dashboard.security_headers``).

A Streamlit server imports a page's modules during the first session that runs them: pandas,
Altair (and then Plotly) took about 2 s of the first visitor's first page on a 2-core machine (its
script ran 4.3 s where the next visit's ran 1.0 s). Imported here, that cost moves to start-up.
"""

from __future__ import annotations

import gc
import importlib

from agentwatch_platform.dashboard import security_headers

# The pages' modules that are slow to import (they pull in pandas, NumPy, Altair and the
# wire models), and those every page's first run imports; not those that declare Streamlit
# caches, which want the server's runtime. httpcore is what httpx imports when it builds its
# first client (with trio, about 0.2 s): that was inside the first visitor's sidebar queries.
PRELOAD = (
    "agentwatch_api.client",
    "httpcore",
    "streamlit.components.v1",
    "agentwatch_platform.dashboard.cards",
    "agentwatch_platform.dashboard.overview_spec",
    "agentwatch_platform.dashboard.run_charts",
    "agentwatch_platform.dashboard.svg_charts",
    "agentwatch_platform.dashboard.trace",
)


def preload() -> None:
    """The imports above, the clients' shared TLS settings, and Streamlit's once-a-process check
    whether it runs in a REPL (``inspect.stack()`` over the script's frames, some 10-50 ms of the
    first page's first element): this server is always ``streamlit run``."""
    for name in PRELOAD:
        importlib.import_module(name)
    from streamlit import delta_generator

    from agentwatch_api.client import tls_context

    tls_context()
    delta_generator._use_warning_has_been_displayed = True


# Python's cyclic collector runs after every 700 allocations and walks the young objects; with a
# 10,000-span run in the page's cache it took about a third of run detail's script
# (bench/results/tuning.md). Reference counting frees nearly all of a page's garbage anyway. The
# collector's thresholds (``collector.tuning``); what was imported at start-up is frozen out of the scans.
GC_THRESHOLDS = (100_000, 50, 100)


def main() -> None:
    """``python -m dashboard.server run app.py [streamlit flags]``, as ``python -m streamlit``."""
    preload()
    security_headers.install()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
    from streamlit.web import cli

    cli.main(prog_name="streamlit")


if __name__ == "__main__":
    main()
