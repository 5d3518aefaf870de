"""``python -m evalita_eval.cli``: the ``evalita-eval`` command (the sweep starts its runs so, with this Python)."""

from . import main

main()
