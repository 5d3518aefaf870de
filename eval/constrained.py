"""Constrained decoding (``--constrained``): the constraints of each task and their
enforcement in ``transformers``' ``generate`` with xgrammar.

Why xgrammar: vLLM 0.32 (our ``vllm`` backend's engine) depends on xgrammar 0.2.8 and
uses it by default for structured outputs (``backend="auto"``), and xgrammar ships a
``transformers`` logits-processor path; pinning the same version makes the hf/fast and
the vLLM backends enforce one grammar with one library. outlines-core and llguidance
are also vLLM dependencies but have no maintained ``transformers`` integration of the
same version; lm-format-enforcer is slower (character-level parsing per token).

Constraints (``api.Constraint``): multiple-choice settings use a ``choice`` set (the
letters for CE, the answer texts for CE-NI and OE, eval/settings.py); the generative
tasks use a ``regex`` of the output format their parser reads (eval/parsers.py):

* NER ``Entità$TIPO,Entità$TIPO`` with TIPO in PER/LOC/ORG, or ``&&NOENT&&``;
* REL ``misura$esame%misura$esame``, or ``&&NOREL&&``;
* LS ``lemma, lemma, ...`` on one line, or ``&&NOSYN&&``.
SUM (free text) has no constraint. Every gold answer of the test data must be accepted
(tests/test_settings.py checks it on the fixtures).
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from .api import Constraint

# Entity texts and mentions may hold the pair separator themselves ("Via Principe Amedeo, 184",
# "31,9%" in the KIND and CLinkaRT training data): only $ and line breaks are excluded.
_PIECE = r"[^$\n]+"
_NER = rf"&&NOENT&&|{_PIECE}\$(PER|LOC|ORG)(, ?{_PIECE}\$(PER|LOC|ORG))*"
_REL = rf"&&NOREL&&|{_PIECE}\${_PIECE}(%{_PIECE}\${_PIECE})*"
_WORD = r"[^,\n]+"
_LS = rf"&&NOSYN&&|{_WORD}(, ?{_WORD})*"

TASK_PATTERNS = {"ner": _NER, "rel": _REL, "ls": _LS}


def task_constraint(task_id: str) -> Constraint | None:
    """The output-format constraint of a generative task; None where the output is free text."""
    pattern = TASK_PATTERNS.get(task_id)
    return Constraint("regex", pattern=pattern) if pattern is not None else None


def choice_constraint(choices: Sequence[str]) -> Constraint:
    return Constraint("choice", choices=tuple(choices))


def ebnf(constraint: Constraint) -> str:
    """The constraint as an xgrammar EBNF grammar (choices as quoted alternatives)."""
    if constraint.kind == "choice":
        if not constraint.choices:
            raise ValueError("a choice constraint needs at least one choice")
        return "root ::= " + " | ".join(json.dumps(c, ensure_ascii=False) for c in constraint.choices)
    raise ValueError(f"constraint kind {constraint.kind!r} has no EBNF form; compile it as a regex")


class GrammarCache:
    """Compiles each distinct constraint once per tokenizer."""

    def __init__(self, tokenizer: Any, vocab_size: int) -> None:
        import xgrammar as xgr

        self._xgr = xgr
        info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size)
        self.compiler = xgr.GrammarCompiler(info)
        self.vocab_size = vocab_size
        self._compiled: dict[Constraint, Any] = {}

    def compiled(self, constraint: Constraint) -> Any:
        if constraint not in self._compiled:
            if constraint.kind == "regex":
                self._compiled[constraint] = self.compiler.compile_regex(constraint.pattern)
            elif constraint.kind == "choice":
                self._compiled[constraint] = self.compiler.compile_grammar(ebnf(constraint))
            else:
                raise ValueError(f"unknown constraint kind {constraint.kind!r}; expected choice or regex")
        return self._compiled[constraint]

    def logits_processor(self, constraints: Sequence[Constraint]) -> "Any":
        """A fresh ``transformers`` logits processor for one ``generate`` call, one grammar per row."""
        return _GrammarLogitsProcessor(self._xgr, [self.compiled(c) for c in constraints], self.vocab_size)


class _GrammarLogitsProcessor:
    """Masks, per row, the tokens its grammar forbids (xgrammar's bitmask).

    Unlike ``xgrammar.contrib.hf.LogitsProcessor`` it tolerates rows that ``generate``
    has finished (padding after EOS or a stop string): a row whose matcher rejects the
    sampled token, or has terminated, is left alone from then on.
    """

    def __init__(self, xgr: Any, grammars: list[Any], vocab_size: int) -> None:
        self.xgr = xgr
        self.matchers = [xgr.GrammarMatcher(g) for g in grammars]
        self.done = [False] * len(grammars)
        self.bitmask = xgr.allocate_token_bitmask(len(grammars), vocab_size)
        self.started = False

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        if self.started:
            for row, matcher in enumerate(self.matchers):
                if not self.done[row] and (matcher.is_terminated() or not matcher.accept_token(int(input_ids[row, -1]))):
                    self.done[row] = True
        self.started = True
        self.bitmask.fill_(-1)  # all bits set: every token allowed (finished rows)
        for row, matcher in enumerate(self.matchers):
            if not self.done[row] and not matcher.is_terminated():
                matcher.fill_next_token_bitmask(self.bitmask, row)
        width = scores.shape[-1]
        masked = scores.float().cpu() if scores.device.type not in ("cpu", "cuda") else scores
        self.xgr.apply_token_bitmask_inplace(masked, self.bitmask.to(masked.device), vocab_size=width)
        return masked.to(scores.device) if masked is not scores else masked


def accepts(cache: GrammarCache, constraint: Constraint, text: str, tokenizer: Any) -> bool:
    """Whether ``text`` (tokenized as the model would write it) is a complete, allowed answer."""
    matcher = cache._xgr.GrammarMatcher(cache.compiled(constraint))
    for token in tokenizer.encode(text, add_special_tokens=False):
        if not matcher.accept_token(token):
            return False
    return matcher.is_completed() if hasattr(matcher, "is_completed") else matcher.accept_token(tokenizer.eos_token_id)
