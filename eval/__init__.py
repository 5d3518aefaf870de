"""evalita-eval: evaluate language models on the Evalita-LLM tasks (installed as ``evalita_eval``)."""

__version__ = "0.1.0"
