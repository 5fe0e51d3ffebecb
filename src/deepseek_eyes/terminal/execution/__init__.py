"""Running one planned command: the child's world (``sandbox``: environment, scratch HOME,
bubblewrap), the process and its output (``process``), execution sessions and their plans
(``sessions``), live events (``events``) and redaction of what leaves the server
(``redact``)."""
