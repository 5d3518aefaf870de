"""What the backends share about a model (CONTRIBUTING.md's layout table)."""
