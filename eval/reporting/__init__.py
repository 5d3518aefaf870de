"""Everything computed from finished runs: tables, statistics, bootstrap intervals, rank
scores, plots, baselines, the ``report``, ``aggregate`` and ``compare`` commands."""
