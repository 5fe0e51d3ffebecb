"""The runtime: sessions, turns, the model-facing view, and the tools the model may call."""
