"""evalita-data: build, validate and publish the Evalita-LLM benchmark datasets."""

__version__ = "0.1.0"
