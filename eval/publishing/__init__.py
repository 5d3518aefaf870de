"""Publishing a run's outcome: results and samples as a Hub dataset (``push-results``) and
lm-evaluation-harness task files for our datasets (``export-lm-eval``)."""
