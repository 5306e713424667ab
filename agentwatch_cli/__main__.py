"""``python -m agentwatch_cli``: the ``agentwatch`` command, without the console script."""

import sys

from agentwatch_cli import main

sys.exit(main())
