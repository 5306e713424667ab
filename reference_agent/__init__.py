"""agentwatch reference_agent."""
