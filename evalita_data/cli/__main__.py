"""``python -m evalita_data.cli``: the ``evalita-data`` command."""

from . import main

main()
