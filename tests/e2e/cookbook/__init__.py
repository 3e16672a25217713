"""The wiring cookbook (docs/agents.md): one tested agent and flow per framework."""
