"""Parsers of generated answers (NER, REL, LS). They never raise, whatever the model wrote.

The answer formats the tasks declare (``TaskSpec.output_pattern``) are the forms these
parsers read completely; an answer outside its format still gets parsed, as lm-eval does.

They reproduce lm-evaluation-harness's ``evalita_llm/utils.py`` parsing exactly, so
that the lm-eval-compatible scores match; the strict scores reuse the same parse.
"""

from __future__ import annotations

import re

NO_ENT = "&&NOENT&&"
NO_REL = "&&NOREL&&"
WRONG = "WRONG"  # lm-eval's marker for an empty answer
NO_SYN = "&&NOSYN&&"  # LS: no substitute (lm-eval ls_doc_to_target)
# One side of an "a$b" pair in the NER and REL answer formats (TaskSpec.output_pattern). Entity
# texts and mentions may hold the pair separator themselves ("Via Principe Amedeo, 184", "31,9%"
# in the KIND and CLinkaRT training data): only $ and line breaks are excluded.
PAIR_PIECE = r"[^$\n]+"


def parse_ner(output: str) -> list[tuple[str, str]] | list[str]:
    """(entity text, TYPE) pairs of ``Entità$Tipo,Entità$Tipo``.

    As lm-eval: an answer containing &&NOENT&& is no entity ([]); an empty answer is
    ``["WRONG"]`` (one spurious prediction); pieces with empty text are skipped.
    """
    if NO_ENT in output:
        return []
    if output == "":
        return [WRONG]
    pairs = []
    for piece in output.split(","):
        parts = piece.strip().split("$")
        text, typ = parts[0], (parts[1] if len(parts) > 1 else "")
        if text != "":
            pairs.append((text, typ.upper()))
    return pairs


def parse_rel(output: str) -> list[tuple[str, str]]:
    """(measurement, test) pairs of ``misura$esame%misura$esame``; [] for &&NOREL&&.

    An empty answer is one empty pair, as lm-eval's ``["WRONG"]`` then behaves.
    """
    if NO_REL in output:
        return []
    if output == "":
        return [("WRONG", "")]
    pairs = []
    for piece in output.split("%"):
        parts = piece.split("$")
        pairs.append((parts[0].strip(), parts[1].strip() if len(parts) > 1 else ""))
    return pairs


def parse_ls(output: str, keep: int = 10) -> list[str]:
    """The first ``keep`` comma-separated words of the first line (lm-eval's ``split_text_with_regex``).

    Quoted segments are split again on commas, double quotes are removed, and the last
    kept word loses its non-alphabetic characters (e.g. a final full stop).
    """
    first = output.split("\n")[0]
    words: list[str] = []
    for match in re.findall(r"[^,]+", first):
        if match.startswith('"') and match.endswith('"'):
            words.extend(re.findall(r"[^,]+", match[1:-1]))
        else:
            words.append(match)
    words = [w.strip().replace('"', "") for w in words][:keep]
    if words:
        words[-1] = "".join(ch for ch in words[-1] if ch.isalpha())
    return words
