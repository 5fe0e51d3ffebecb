"""Code Mode: the model's program calls MCP tools in a sandbox (docs/code-mode.md)."""
