"""jevserve: decision-model-aware LLM serving."""

__version__ = "0.1.0"
