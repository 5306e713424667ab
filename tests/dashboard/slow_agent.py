"""A slow agent for the live-run tests: one SDK run whose steps are spaced out by sleeps.

``python -m tests.dashboard.slow_agent --name A --steps N --pause S`` (collector and key from
``AGENTWATCH_ENDPOINT`` / ``AGENTWATCH_API_KEY``): each step holds one LLM call with recorded
usage and one tool call, then sleeps inside the step (left open, as a step that waits on a
slow tool would be); it prints ``step K`` once the step's calls have ended. A test
SIGKILLs it mid-run to make a crashed (incomplete) run.
"""

from __future__ import annotations

import argparse
import time

import agentwatch

MODEL = "gpt-4o-mini"  # a model with a list price: the run has a cost


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", required=True)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--pause", type=float, required=True)
    args = parser.parse_args()
    agentwatch.init(service_name="slow-agent", export_interval_s=0.2)
    with agentwatch.run(args.name, user_id="watcher"):
        for k in range(args.steps):
            with agentwatch.step("think"):
                with agentwatch.llm(model=MODEL) as call:
                    call.record_usage(input_tokens=1000 + 100 * k, output_tokens=50)
                with agentwatch.tool("search"):
                    time.sleep(0.01)
                print(f"step {k}", flush=True)
                time.sleep(args.pause)  # the step stays open: its calls are stored, it is not
    agentwatch.shutdown()


if __name__ == "__main__":
    main()
