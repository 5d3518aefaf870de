"""The answer parsers moved to ``evalita_data.scoring.parsers`` (shared with the task
declarations); re-exported here for code written against this module."""

from evalita_data.scoring.parsers import NO_ENT, NO_REL, WRONG, parse_ls, parse_ner, parse_rel  # noqa: F401
