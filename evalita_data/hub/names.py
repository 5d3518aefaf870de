"""Checks of Hub organisation and repository names given on the command line.

A name becomes part of URLs and, with ``--to-dir``, of local paths: ``..``, slashes or
spaces would point elsewhere. The rule is the Hub's own (letters, digits, ``-``, ``_``,
``.``; no leading or trailing ``-``/``.``, no ``--`` or ``..``; at most 96 characters).
"""

from __future__ import annotations

import re

from ..errors import EvalitaDataError

_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?")


class HubNameError(EvalitaDataError, ValueError):
    """An organisation or repository name the Hub would refuse."""


def _valid(name: str) -> bool:
    return bool(_NAME.fullmatch(name)) and "--" not in name and ".." not in name


def check_org(org: str, what: str = "organisation") -> str:
    if not _valid(org):
        raise HubNameError(f"{what} {org!r}: expected a Hub name (letters, digits, '-', '_', '.'; "
                           "no leading/trailing '-' or '.', no '--' or '..', at most 96 characters)")
    return org


def check_repo_id(repo_id: str) -> str:
    """``ORG/NAME``, each part a valid Hub name."""
    parts = repo_id.split("/")
    if len(parts) != 2 or not all(_valid(p) for p in parts):
        raise HubNameError(f"repository {repo_id!r}: expected ORG/NAME (letters, digits, '-', '_', '.'; "
                           "no leading/trailing '-' or '.', no '--' or '..')")
    return repo_id
