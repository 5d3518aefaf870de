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

from bisect import bisect_right
from functools import lru_cache
from itertools import accumulate, compress, count, filterfalse
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


# What the rules need to know of one token: (straight quote kind or None, no space
# before it, no space after it, elided form). Most tokens are words: this very tuple.
PLAIN: tuple[str | None, bool, bool, bool] = (None, False, False, False)


@lru_cache(maxsize=1 << 16)
def _kind(token: str) -> tuple[str | None, bool, bool, bool]:
    """The rules' view of one token, computed once per distinct token (they repeat)."""
    quote = '"' if token == '"' else "'" if token in ("'", "’") else None
    kind = (quote, token in CLITICS or _only(token, CLOSING), _only(token, OPENING), _is_elision(token))
    return PLAIN if kind == PLAIN else kind


def separators(tokens: Sequence[str], starts: Sequence[int] = (0,)) -> list[str]:
    """What goes before each token (``""`` or ``" "``) of several sentences laid end to end.

    ``starts``: the index of each sentence's first token, ascending, ``0`` first (a token
    there gets ``""``; quotes alternate within a sentence). Whole-list operations with a
    Python step only at the few tokens that are not plain words: one call per file of
    KIND (up to 330k tokens) instead of one per sentence.
    """
    if not tokens:
        return []
    # Words and numbers (str.isalnum) are plain: no rule's character is a letter or a digit.
    kinds = {t: k for t in filterfalse(str.isalnum, set(tokens)) if (k := _kind(t)) is not PLAIN}
    seps = [" "] * len(tokens)
    for s in starts:
        seps[s] = ""
    last = len(tokens) - 1
    open_in: dict[str, int] = {}  # straight quote kind -> sentence where one is open
    # Every step only removes a space: their order does not matter, and removing the one
    # before a sentence's first token (it has none) changes nothing.
    for i in compress(count(), map(kinds.__contains__, tokens)):
        quote, glue_before, glue_after, elision = kinds[tokens[i]]
        if quote is not None:  # straight quotes alternate open/close within a sentence, one count per kind
            sentence = bisect_right(starts, i)
            closes = open_in.get(quote) == sentence
            open_in[quote] = -1 if closes else sentence
            glue_before, glue_after = glue_before or closes, glue_after or not closes
        if glue_before:
            seps[i] = ""
        if i < last and (glue_after or (elision and tokens[i + 1][:1].isalnum())):
            seps[i + 1] = ""
    return seps


def join_tokens(tokens: Sequence[str]) -> list[str]:
    """Each token of one sentence with what goes before it; joined, they are the sentence."""
    return list(map(str.__add__, separators(tokens), tokens))


def token_spans(pieces: list[str], tokens: Sequence[str]) -> list[tuple[int, int]]:
    """The (start, end) of every token in ``"".join(pieces)`` (pieces from :func:`join_tokens`)."""
    ends = list(accumulate(map(len, pieces)))
    return list(zip(map(int.__sub__, ends, map(len, tokens)), ends))


def detokenize(tokens: Sequence[str]) -> tuple[str, list[tuple[int, int]]]:
    """The sentence text and the (start, end) character span of every token in it."""
    pieces = join_tokens(tokens)
    return "".join(pieces), token_spans(pieces, tokens)
