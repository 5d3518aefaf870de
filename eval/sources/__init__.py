"""Where the data of an evaluation come from: one ``Source`` class per kind of place, ``FolderSource`` (a build folder,
or one in the Hub layout: ``--data DIR``), ``HubSource`` (what ``evalita-data push`` published: ``--hub-org ORG``) and
``OfficialSource`` (the official Evalita-LLM copies: ``--data hf:ORG``); ``open_source`` picks one from the options."""

from __future__ import annotations

from pathlib import Path

from .base import Source


def open_source(data: str | Path | None = None, hub_org: str | None = None) -> Source:
    """The source that ``--data`` (a folder or ``hf:ORG``) or ``--hub-org`` names; exactly one is given."""
    if (data is None) == (hub_org is None):
        raise ValueError("give exactly one of a data folder (or hf:ORG) or a Hub organisation")
    if hub_org is not None:
        from .hub import HubSource

        return HubSource(hub_org)
    from .official import PREFIX, OfficialSource, is_official

    if is_official(str(data)):
        return OfficialSource(str(data).removeprefix(PREFIX))
    if not Path(data).is_dir():
        raise FileNotFoundError(f"{data!r} is not a folder (nor hf:ORG)")
    from .folder import FolderSource

    return FolderSource(data)
