"""Agent Desk: a desktop workbench for running an LLM agent safely."""

__version__ = "0.1.0"
