"""Checks on every path that is built from user input or data, before anything is written.

Inputs are read-only to us: an output folder may not be an input folder, lie inside
one, or contain one (writing or replacing it would destroy the originals). Names that
come from data (split keys, task ids) or from the command line (Hub org and repo names)
must match strict patterns, so that no ``..``, absolute path or separator can make us
write outside the target folder.
"""

from __future__ import annotations

import re
from pathlib import Path

from .errors import EvalitaDataError

# A split key: "train", "test_all", or "<config>/<split>" for NER ("adg/dev").
SPLIT_KEY = re.compile(r"[a-z0-9][a-z0-9_]{0,63}(/[a-z0-9][a-z0-9_]{0,63})?")
# A Hub user or organisation name, and a repository name (the Hub's own rules, stricter on
# purpose: letters, digits, '-', '_', '.', no leading/trailing '.'/'-', no '..' or '--').
HUB_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?")


class UnsafePath(EvalitaDataError):
    """A path or name that would make us overwrite an input or write outside the target."""


def check_output_apart(out: Path, inputs: dict[str, Path], out_flag: str = "--out") -> None:
    """Refuse an output folder equal to, inside, or containing an input folder (symlinks resolved)."""
    o = Path(out).resolve()
    for flag, path in inputs.items():
        i = Path(path).resolve()
        if o == i:
            raise UnsafePath(f"{out_flag} {out} is the same folder as {flag} {path}; inputs are never written: choose "
                             f"another {out_flag}")
        if i in o.parents:
            raise UnsafePath(f"{out_flag} {out} is inside {flag} {path}; inputs are never written: choose a folder "
                             "outside it")
        if o in i.parents:
            raise UnsafePath(f"{out_flag} {out} contains {flag} {path}; replacing it would destroy the inputs: choose "
                             f"another {out_flag}")


def check_split_key(key: object, where: str) -> str:
    """A split key from a manifest, checked before it becomes part of a path."""
    if not isinstance(key, str) or not SPLIT_KEY.fullmatch(key):
        raise UnsafePath(f"{where}: split name {key!r} is not allowed; expected lower-case letters, digits and '_' "
                         "(NER: '<domain>/<split>')")
    return key


def check_hub_name(name: object, what: str = "--org") -> str:
    """A Hub user/organisation or repository name, checked before use in a path or URL."""
    if not isinstance(name, str) or not HUB_NAME.fullmatch(name) or ".." in name or "--" in name:
        raise UnsafePath(f"{what} {name!r} is not a valid Hub name; expected letters, digits, '-', '_' or '.' (at most "
                         "96, not starting or ending with '-' or '.', no '..' or '--')")
    return name


def check_inside(path: Path, root: Path) -> Path:
    """``path`` if it resolves inside ``root`` (every symbolic link on the way followed); refuses anything that would
    escape it."""
    p, r = Path(path).resolve(), Path(root).resolve()
    if p != r and r not in p.parents:
        raise UnsafePath(f"{path} resolves to {p}, outside {root} (through a symbolic link or '..'); refused: nothing "
                         f"is written outside {root}")
    return path
