"""DeepSeekEyes: eyes, hands and a safe terminal for a text-only reasoning model."""

from deepseek_eyes.errors import DeepSeekEyesError

__all__ = ["DeepSeekEyesError", "__version__"]

__version__ = "0.1.0"
