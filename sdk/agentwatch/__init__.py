"""agentwatch SDK (placeholder until the SDK lands)."""
