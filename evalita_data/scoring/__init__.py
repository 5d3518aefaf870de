"""What the data package and the evaluator share: metrics, answer parsers, answer formats.

Task declarations (``evalita_data/tasks/``, added tasks) list these metrics; the evaluator
(``evalita_eval``) computes them and reads the same parsers. Nothing here imports the
evaluator, and heavy libraries (``rouge_score``) are imported inside the functions that
need them, so ``evalita_data`` loads without torch, numpy or scikit-learn.
"""
