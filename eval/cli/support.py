"""What every ``evalita-eval`` command shares (eval/cli/__init__.py is the command table): the install hint
of a missing evaluator extra, the --model check and the default --device."""

from __future__ import annotations

import importlib.util

import click

# What each command imports beyond the data toolkit's own dependencies.
RUN_NEEDS = ("torch", "transformers", "datasets", "numpy", "sklearn", "rouge_score")
STATS_NEEDS = ("numpy", "scipy", "matplotlib", "pydantic")  # pydantic: lm-eval folders (reporting/lm_eval_*.py)


def require(command: str, modules: tuple[str, ...]) -> None:
    """Stop with an install hint, not a traceback, when the evaluator extra is missing."""
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise click.ClickException(f"`evalita-eval {command}` needs {', '.join(missing)}, which `pip install .` alone "
                                   "does not install. Install the evaluator from the clone: "
                                   "pip install torch -e '.[eval]'")


def check_model_name(model: str, backend_args: tuple[str, ...] = ()) -> None:
    """--model checked before anything heavy (model_path.py): one line saying what to pass."""
    from ..model_path import ModelPathError, check_model_path

    try:
        check_model_path(model, backend_args)
    except ModelPathError as err:
        if err.usage:
            raise click.BadParameter(str(err), param_hint="--model") from None
        raise click.ClickException(str(err)) from None


def default_device() -> str:
    """``--device`` when none is given: the GPU when torch sees one, else the CPU (``auto`` is not this: it spreads one
    model over every device with accelerate's device_map)."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def backend_names() -> list[str]:
    """The registered backends (--backend's choices), or the install hint when the evaluator extra is missing."""
    from ..backends import backend_names as registered

    try:
        return registered()
    except ImportError:
        require("run", RUN_NEEDS)  # a missing evaluator extra: the install hint
        raise
