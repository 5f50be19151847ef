"""Presentation helpers shared by the CLI: rich tables and JSON output."""
