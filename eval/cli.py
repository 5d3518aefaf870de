"""The ``evalita-eval`` command."""

from __future__ import annotations

import click

from . import __version__


@click.group()
@click.version_option(__version__, prog_name="evalita-eval")
def main() -> None:
    """Evaluate language models on the Evalita-LLM tasks and report multi-prompt scores."""


if __name__ == "__main__":
    main()
