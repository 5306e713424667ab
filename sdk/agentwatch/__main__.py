"""``python -m agentwatch``: the ``agentwatch`` command, without the console script."""

import sys

from agentwatch.cli import main

sys.exit(main())
