"""Prompt contexts with k few-shot examples, as lm-evaluation-harness builds them (docs/evaluator.md, "Prompts, targets
and few-shot"; docs/settings.md, "System instruction and multi-turn few-shot")."""

from __future__ import annotations

import random
from typing import Callable, Sequence

from evalita_data.prompts import CompiledTask

TARGET_DELIMITER = " "
FEWSHOT_DELIMITER = "\n\n"
ChatRenderer = Callable[[list[dict[str, str]]], str]


def sample_examples(rnd: random.Random, pool: Sequence[dict], k: int, eval_doc: dict | None = None) -> list[dict]:
    """lm-eval ``ContextSampler.sample``: k docs; when the pool is the eval split, never the doc itself."""
    if k == 0:
        return []
    if k > len(pool):
        raise ValueError(f"{k} few-shot examples asked for, but the few-shot split has only {len(pool)}")
    if eval_doc is None:
        return rnd.sample(list(pool), k)
    drawn = [x for x in rnd.sample(list(pool), k + 1) if x != eval_doc][:k]
    if len(drawn) < k:
        drawn = rnd.sample([x for x in pool if x != eval_doc], k)
    return drawn


def build_contexts(task: CompiledTask, prompt: str, docs: Sequence[dict], fewshot_pool: Sequence[dict], k: int,
                   seed: int, chat: ChatRenderer | None = None, pool_is_eval_split: bool = False,
                   system_instruction: str | None = None, multiturn: bool = True) -> list[str]:
    if chat is not None:
        return [chat(m)
                for m in build_chat_messages(task, prompt, docs, fewshot_pool, k, seed, pool_is_eval_split,
                                             system_instruction, multiturn)]
    return [(system_instruction or "") + _single_turn(turns, question)
            for turns, question in _turns(task, prompt, docs, fewshot_pool, k, seed, pool_is_eval_split)]


def build_chat_messages(task: CompiledTask, prompt: str, docs: Sequence[dict], fewshot_pool: Sequence[dict], k: int,
                        seed: int, pool_is_eval_split: bool = False, system_instruction: str | None = None,
                        multiturn: bool = True) -> list[list[dict[str, str]]]:
    """Per document: its chat messages, which chat templates (local or a server's) render (module docstring)."""
    out = []
    for turns, question in _turns(task, prompt, docs, fewshot_pool, k, seed, pool_is_eval_split):
        messages = [{"role": "system", "content": system_instruction}] if system_instruction else []
        if multiturn:
            for q, a in turns:
                messages += [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
            messages.append({"role": "user", "content": question})
        else:
            messages.append({"role": "user", "content": _single_turn(turns, question)})
        out.append(messages)
    return out


def _turns(task: CompiledTask, prompt: str, docs: Sequence[dict], fewshot_pool: Sequence[dict], k: int, seed: int,
           pool_is_eval_split: bool) -> list[tuple[list[tuple[str, str]], str]]:
    """Per document: its (example prompt, example answer) pairs and its own rendered prompt."""
    rnd = random.Random(seed)
    out = []
    for doc in docs:
        examples = sample_examples(rnd, fewshot_pool, k, doc if pool_is_eval_split else None)
        out.append(([(task.render(prompt, ex), task.fewshot_answer(prompt, ex)) for ex in examples],
                    task.render(prompt, doc)))
    return out


def _single_turn(turns: Sequence[tuple[str, str]], question: str) -> str:
    return "".join(q + TARGET_DELIMITER + a + FEWSHOT_DELIMITER for q, a in turns) + question


def messages_as_text(messages: Sequence[dict[str, str]]) -> str:
    """A readable stand-in for messages a server renders itself (samples' "prompt" field)."""
    return "".join(f"<|{m['role']}|>\n{m['content']}\n" for m in messages)
