"""agentwatch dashboard."""
