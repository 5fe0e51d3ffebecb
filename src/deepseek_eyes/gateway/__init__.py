"""The OpenAI-compatible HTTP gateway (``deepseek-eyes serve``)."""
