"""What a conversion dropped, repaired or could not find, counted by reason."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ..manifest import BuildReport, MissingPart

# How many example locations are kept per reason (the counts are always complete).
MAX_EXAMPLES = 20


@dataclass
class ConversionReport:
    """Filled by a converter while it runs; stored in the manifest.

    Every record that a converter drops or changes goes through :meth:`drop` or
    :meth:`repair`, so nothing is lost silently.
    """

    dropped: Counter = field(default_factory=Counter)
    repaired: Counter = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)
    missing: list[MissingPart] = field(default_factory=list)
    notes: dict[str, object] = field(default_factory=dict)
    # The task's obtain_hint, for missing parts whose converter names no hint of its own.
    default_hint: str = ""

    def _example(self, kind: str, reason: str, where: str) -> None:
        ex = self.examples.setdefault(f"{kind}: {reason}", [])
        if len(ex) < MAX_EXAMPLES:
            ex.append(where)

    def drop(self, reason: str, where: str) -> None:
        """Count a record left out of the output, with where it came from."""
        self.dropped[reason] += 1
        self._example("dropped", reason, where)

    def repair(self, reason: str, where: str) -> None:
        """Count a record kept after a documented fix."""
        self.repaired[reason] += 1
        self._example("repaired", reason, where)

    def missing_part(self, files: list[str], splits: list[str], hint: str | None = None) -> None:
        """Note splits that could not be built because optional originals are absent (hint: the task's by default)."""
        self.missing.append(MissingPart(list(files), list(splits), hint or self.default_hint))

    def note(self, key: str, value: object) -> None:
        """Keep a fact about the conversion (e.g. a label distribution) in the manifest."""
        self.notes[key] = value

    def build_report(self) -> BuildReport:
        """The report as the task's manifest entry holds it."""
        return BuildReport(dropped=dict(sorted(self.dropped.items())), repaired=dict(sorted(self.repaired.items())),
                           examples=dict(sorted(self.examples.items())), missing=list(self.missing), notes=self.notes)

    def to_json(self) -> dict:
        return self.build_report().to_json()
