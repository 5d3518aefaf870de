"""Prompt contexts with k few-shot examples, as lm-evaluation-harness builds them.

Plain text: each example is its prompt, the target delimiter " " and its answer,
followed by the few-shot delimiter "\\n\\n"; then the prompt of the document.
Chat mode: the examples are user/assistant turns and the document the last user
turn, rendered by the tokenizer's own chat template. Examples are drawn with one
``random.Random(seed)`` per (task, prompt), in document order, as lm-eval's
sampler (seed 1234 by default) does, so the examples match lm-eval's.
"""

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


def build_contexts(
    task: CompiledTask,
    prompt: str,
    docs: Sequence[dict],
    fewshot_pool: Sequence[dict],
    k: int,
    seed: int,
    chat: ChatRenderer | None = None,
    pool_is_eval_split: bool = False,
) -> list[str]:
    if chat is not None:
        return [chat(m) for m in build_chat_messages(task, prompt, docs, fewshot_pool, k, seed, pool_is_eval_split)]
    rnd = random.Random(seed)
    contexts = []
    for doc in docs:
        examples = sample_examples(rnd, fewshot_pool, k, doc if pool_is_eval_split else None)
        shots = "".join(task.render(prompt, ex) + TARGET_DELIMITER + task.fewshot_answer(prompt, ex) + FEWSHOT_DELIMITER for ex in examples)
        contexts.append(shots + task.render(prompt, doc))
    return contexts


def build_chat_messages(
    task: CompiledTask, prompt: str, docs: Sequence[dict], fewshot_pool: Sequence[dict], k: int, seed: int, pool_is_eval_split: bool = False
) -> list[list[dict[str, str]]]:
    """Per document: the examples as user/assistant turns, then the document as the last user turn."""
    rnd = random.Random(seed)
    out = []
    for doc in docs:
        messages = []
        for ex in sample_examples(rnd, fewshot_pool, k, doc if pool_is_eval_split else None):
            messages += [{"role": "user", "content": task.render(prompt, ex)}, {"role": "assistant", "content": task.fewshot_answer(prompt, ex)}]
        messages.append({"role": "user", "content": task.render(prompt, doc)})
        out.append(messages)
    return out


def messages_as_text(messages: Sequence[dict[str, str]]) -> str:
    """A readable stand-in for messages a server renders itself (samples' "prompt" field)."""
    return "".join(f"<|{m['role']}|>\n{m['content']}\n" for m in messages)
