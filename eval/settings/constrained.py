"""Constrained decoding (``--constrained``): the constraint of each task and setting, enforced by the engines
(docs/settings.md, "Constrained decoding"). A task without an answer format (SUM) cannot be constrained."""

from __future__ import annotations

from typing import Sequence

from evalita_data.taskspec import TaskSpec

from ..api import Constraint


def task_constraint(spec: TaskSpec) -> Constraint | None:
    """The answer-format constraint of a generative task; None where the output is free text."""
    if spec.output_pattern is None:
        return None
    return Constraint("regex", pattern=spec.output_pattern, closings=spec.output_closings,
                      empty_answer=spec.output_empty)


def refuse_unformatted(names: Sequence[str]) -> None:
    """``--constrained`` on named tasks: a ValueError naming the entries whose task declares no answer
    format (``TaskKind.unformatted``), before any work."""
    if names:
        raise ValueError(f"--constrained: {', '.join(names)} declare(s) no answer format (TaskSpec.output_pattern), so "
                         "nothing would constrain the generation; run them without --constrained")


def choice_constraint(choices: Sequence[str]) -> Constraint:
    """--constrained: the model writes exactly one of the choices (letters, or answer texts)."""
    return Constraint("choice", choices=tuple(choices))
