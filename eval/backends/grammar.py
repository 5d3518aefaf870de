"""Constrained decoding on a local model (the ``hf`` backend): an ``api.Constraint`` compiled by xgrammar and enforced
as a ``transformers`` logits processor (why xgrammar: docs/settings.md). The budget rule (docs/settings.md) reads the
closings the constraint carries, never the task registry."""

from __future__ import annotations

import json
from typing import Any, Sequence

from ..api import Constraint


def closing_rule(constraint: Constraint) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(closing answers, of which those that set the reserved window) of a constraint: its empty answer and closings
    (the declaring task's ``output_empty``, ``output_closings``, carried by the constraint); empty for choices."""
    if constraint.kind != "regex":
        return (), ()
    window = tuple(dict.fromkeys(constraint.closings))
    return ((constraint.empty_answer,) if constraint.empty_answer else ()) + window, window


class GrammarCache:
    """Compiles each distinct constraint once per tokenizer."""

    def __init__(self, tokenizer: Any, vocab_size: int) -> None:
        import xgrammar as xgr

        self._xgr, self.vocab_size, self.tokenizer = xgr, vocab_size, tokenizer
        self.compiler = xgr.GrammarCompiler(xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size))
        self._compiled: dict[Constraint, Any] = {}
        self._closings: dict[Constraint, tuple[list[list[int]], int]] = {}

    def compiled(self, constraint: Constraint) -> Any:
        if constraint not in self._compiled:
            if constraint.kind == "regex":
                self._compiled[constraint] = self.compiler.compile_regex(constraint.pattern)
            elif constraint.kind == "choice":  # an xgrammar EBNF grammar of quoted alternatives
                if not constraint.choices:
                    raise ValueError("a choice constraint needs at least one choice")
                alternatives = " | ".join(json.dumps(c, ensure_ascii=False) for c in constraint.choices)
                self._compiled[constraint] = self.compiler.compile_grammar("root ::= " + alternatives)
            else:
                raise ValueError(f"unknown constraint kind {constraint.kind!r}; expected choice or regex")
        return self._compiled[constraint]

    def closings(self, constraint: Constraint) -> tuple[list[list[int]], int]:
        """The closing candidates of a constraint as token ids (shortest first), and the window: how many last tokens
        are reserved for closing (docs/settings.md)."""
        if constraint not in self._closings:
            templates, reserved = closing_rule(constraint)
            suffixes = sorted({t[i:] for t in templates for i in range(len(t) + 1)}, key=lambda x: (len(x), x))
            candidates = sorted((self._encode(x) for x in suffixes), key=len)
            window = max((len(self._encode(t)) for t in reserved), default=0)
            self._closings[constraint] = (candidates, window)
        return self._closings[constraint]

    def _encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False) if text else []

    def logits_processor(self, constraints: Sequence[Constraint], max_new_tokens: int | None = None) -> "Any":
        """A fresh ``transformers`` logits processor for one ``generate`` call, one grammar per row; given
        ``max_new_tokens``, it closes each answer within that budget."""
        closings = [self.closings(c) for c in constraints] if max_new_tokens is not None else None
        return _GrammarLogitsProcessor(self._xgr, [self.compiled(c) for c in constraints], self.vocab_size,
                                       closings=closings, max_new_tokens=max_new_tokens,
                                       eos_token_id=self.tokenizer.eos_token_id)


class _GrammarLogitsProcessor:
    """Masks, per row, the tokens its grammar forbids (xgrammar's bitmask).

    Unlike ``xgrammar.contrib.hf.LogitsProcessor`` it tolerates rows that ``generate`` has finished (padding after EOS
    or a stop string): a row whose matcher rejects the sampled token, or has terminated, is left alone from then on.
    Budget rule (given ``closings`` and ``max_new_tokens``): docs/settings.md."""

    def __init__(self, xgr: Any, grammars: list[Any], vocab_size: int,
                 closings: list[tuple[list[list[int]], int]] | None = None, max_new_tokens: int | None = None,
                 eos_token_id: int | None = None) -> None:
        self.xgr, self.matchers = xgr, [xgr.GrammarMatcher(g) for g in grammars]
        self.done, self.started, self.steps = [False] * len(grammars), False, 0
        self.bitmask = xgr.allocate_token_bitmask(len(grammars), vocab_size)
        self.closings, self.max_new_tokens, self.eos_token_id = closings, max_new_tokens, eos_token_id
        self.forced: dict[int, list[int]] = {}  # row -> tokens still to force

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        if self.started:
            for row, matcher in enumerate(self.matchers):
                if not self.done[row] and (matcher.is_terminated()
                                           or not matcher.accept_token(int(input_ids[row, -1]))):
                    self.done[row] = True
        self.started = True
        self.bitmask.fill_(-1)  # all bits set: every token allowed (finished rows)
        for row, matcher in enumerate(self.matchers):
            if not self.done[row] and not matcher.is_terminated():
                matcher.fill_next_token_bitmask(self.bitmask, row)
        width = scores.shape[-1]
        masked = scores.float().cpu() if scores.device.type not in ("cpu", "cuda") else scores
        self.xgr.apply_token_bitmask_inplace(masked, self.bitmask.to(masked.device), vocab_size=width)
        self._force_closings(masked)
        self.steps += 1
        return masked.to(scores.device) if masked is not scores else masked

    def _force_closings(self, scores: Any) -> None:
        if self.closings is None or self.max_new_tokens is None:
            return
        left = self.max_new_tokens - self.steps  # tokens this call may still write, this one included
        for row, matcher in enumerate(self.matchers):
            candidates, window = self.closings[row]
            if self.done[row] or matcher.is_terminated() or left > window:
                continue
            if row not in self.forced:
                closing = _shortest_closing(matcher, candidates, self.eos_token_id)
                if closing is None:
                    continue  # no known closing from here: the grammar mask alone applies
                self.forced[row] = closing
            queue = self.forced[row]
            token = queue.pop(0) if queue else self.eos_token_id
            if token is None or token >= scores.shape[-1]:
                continue
            keep = scores[row, token].clone()
            scores[row].fill_(float("-inf"))
            scores[row, token] = keep if keep > float("-inf") else 0.0


def _shortest_closing(matcher: Any, candidates: list[list[int]], eos_token_id: int | None) -> list[int] | None:
    """The first (shortest) candidate after which the grammar accepts EOS; the matcher is left unchanged."""
    for tokens in candidates:
        accepted = 0
        for token in tokens:
            if not matcher.accept_token(token):
                break
            accepted += 1
        ok = accepted == len(tokens) and eos_token_id is not None and matcher.accept_token(eos_token_id)
        undo = accepted + (1 if ok else 0)
        if undo:
            matcher.rollback(undo)
        if ok:
            return list(tokens)
    return None
