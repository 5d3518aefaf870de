"""A regex constraint carries its task's closing rule, and the resume cache's key with it;
the xgrammar engine reads the rule from the constraint, not from the task registry."""

from __future__ import annotations

import dataclasses

from evalita_data.registry import tasks
from evalita_eval.api import Constraint, GenRequest, request_payload
from evalita_eval.backends.grammar import closing_rule
from evalita_eval.settings.constrained import choice_constraint, task_constraint
from evalita_eval.running.cache import request_key


def test_task_constraint_carries_the_declared_closings():
    ner = tasks()["ner"]
    constraint = task_constraint(ner)
    assert (constraint.pattern, constraint.closings, constraint.empty_answer) == (ner.output_pattern, ("x$PER", "x$LOC", "x$ORG"), "&&NOENT&&")
    assert closing_rule(constraint) == (("&&NOENT&&", "x$PER", "x$LOC", "x$ORG"), ("x$PER", "x$LOC", "x$ORG"))


def test_the_closing_rule_is_the_constraints_own_even_for_an_unknown_pattern():
    # No task declares this pattern: the rule comes from the constraint alone.
    constraint = Constraint("regex", pattern="a+|NONE", closings=("a", "a"), empty_answer="NONE")
    assert closing_rule(constraint) == (("NONE", "a"), ("a",))
    assert closing_rule(Constraint("regex", pattern="a+")) == ((), ())
    assert closing_rule(choice_constraint(["A", "B"])) == ((), ())


def test_an_edit_of_the_closings_changes_the_cache_key():
    constraint = task_constraint(tasks()["rel"])
    request = GenRequest("ctx", ("\n",), 16, constraint)
    edited = GenRequest("ctx", ("\n",), 16, dataclasses.replace(constraint, closings=("x$x", "xx$x")))
    emptied = GenRequest("ctx", ("\n",), 16, dataclasses.replace(constraint, empty_answer="NONE"))
    keys = {request_key("m", "generate_until", request_payload(r)) for r in (request, edited, emptied)}
    assert len(keys) == 3


def test_a_choice_constraint_keeps_its_former_key():
    """Constraints without closings (choices) are keyed as before closings existed."""
    request = GenRequest("ctx", ("\n",), 4, choice_constraint(["A", "B"]))
    assert request_payload(request)["constraint"] == {"kind": "choice", "choices": ("A", "B"), "pattern": ""}
