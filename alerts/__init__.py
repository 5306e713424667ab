"""agentwatch alerts."""
