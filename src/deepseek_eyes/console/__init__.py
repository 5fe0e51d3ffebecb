"""The web console: conversations with their evidence over the pixels, approvals, the MCP
control centre, audit and usage, for a person in a browser (docs/how-to/web-console.md)."""
