"""How clients reach the terminal: the MCP server (``server``, stdio and Streamable HTTP),
the HTTP app with the console API and its static files (``http``, ``console/``), and the
HTTP security layer in front of both (``security``)."""
