"""Rebuilding readable Italian text from pre-tokenised tokens, with each token's span.

The rules (also in docs/converters-sentences.md) decide only whether one space
or nothing goes between two tokens; tokens themselves are never changed, so
``text[start:end] == token`` for every returned span.

- No space before a token made only of closing punctuation ``, . ; : ! ? ) ] }
  » ” % … °`` (this covers ``...``), nor before the English clitic ``'s``.
- No space after a token made only of opening punctuation ``( [ { « “``.
- Straight quotes standing alone (``"``, and ``'`` or ``’``) alternate within a
  sentence: the 1st, 3rd, ... opens (no space after), the 2nd, 4th, ... closes
  (no space before). ``"`` and ``'``/``’`` keep separate counts.
- Elision: a token ending in an apostrophe whose word is a known Italian elided
  form (``l'``, ``dell'``, ``un'``, ``quest'``, ``vent'`` ...; see ``ELIDED``)
  joins the next token when that token starts with a letter or digit
  (``l' accordo`` -> ``l'accordo``, ``dell' 8`` -> ``dell'8``). Truncations such
  as ``po'``, ``de'``, ``mo'`` and quoted words (``produzione'``) are not in the
  list and keep their space (``un po' di``).
- Everything else is separated by one space (hyphens, dashes, slashes included:
  the tokenisation does not say whether they were spaced).
"""

from __future__ import annotations

from typing import Sequence

CLOSING = frozenset(",.;:!?)]}»”%…°")
OPENING = frozenset("([{«“")
CLITICS = frozenset({"'s", "’s"})
APOSTROPHES = "'’"

# Italian elided forms (lower case, without the apostrophe) that attach to the next word.
ELIDED = frozenset("""
    l d c s m t v n gl j un ch
    dell all nell dall sull coll degl agl dagl negl sugl quegl
    quest quell codest anch neanch com cos qualcos dov ov ond quand qual quant tant
    tutt senz mezz sant bell buon grand mal sott contr mentr fin fors poc nient altr
    alcun nessun cert prim pover brav gliel dev diss dovrebb potrebb perch marc
    vent trent quarant cinquant sessant settant ottant novant cent mill
    quattr ventiquattr trentaquattr cinquantaquattr diciott quarantott diciasett
""".split())


def _is_elision(token: str) -> bool:
    return len(token) > 1 and token[-1] in APOSTROPHES and token[:-1].lower() in ELIDED


def _only(token: str, chars: frozenset[str]) -> bool:
    return all(ch in chars for ch in token)


def detokenize(tokens: Sequence[str]) -> tuple[str, list[tuple[int, int]]]:
    """The sentence text and the (start, end) character span of every token in it."""
    parts: list[str] = []
    spans: list[tuple[int, int]] = []
    pos = 0
    glue_next = True  # no space before the first token
    open_quotes = {'"': False, "'": False}
    for i, token in enumerate(tokens):
        quote = '"' if token == '"' else "'" if token in ("'", "’") else None
        closes = quote is not None and open_quotes[quote]
        if quote is not None:
            open_quotes[quote] = not closes
        glue_before = glue_next or closes or token in CLITICS or _only(token, CLOSING)
        if not glue_before:
            parts.append(" ")
            pos += 1
        parts.append(token)
        spans.append((pos, pos + len(token)))
        pos += len(token)
        nxt = tokens[i + 1] if i + 1 < len(tokens) else ""
        glue_next = (
            (quote is not None and not closes)
            or _only(token, OPENING)
            or (_is_elision(token) and nxt[:1].isalnum())
        )
    return "".join(parts), spans
