"""Prompt contexts with k few-shot examples, as lm-evaluation-harness builds them.

Plain text: each example is its prompt, the target delimiter " " and its answer,
followed by the few-shot delimiter "\\n\\n"; then the prompt of the document.
Chat mode: the examples are user/assistant turns and the document the last user
turn, rendered by the tokenizer's own chat template. Examples are drawn with one
``random.Random(seed)`` per (task, prompt), in document order, as lm-eval's
sampler (seed 1234 by default) does, so the examples match lm-eval's.

A system instruction (lm-eval's ``--system_instruction``) is, in plain text, put before
everything with no delimiter; in chat mode it is the system message. Chat mode with
``multiturn=False`` (lm-eval's ``--fewshot_as_multiturn`` off) puts the examples and the
question in one user message, joined as in plain text (lm-eval's ``multiturn_to_singleturn``).
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
    system_instruction: str | None = None,
    multiturn: bool = True,
) -> list[str]:
    rnd = random.Random(seed)
    contexts = []
    for doc in docs:
        examples = sample_examples(rnd, fewshot_pool, k, doc if pool_is_eval_split else None)
        turns = [(task.render(prompt, ex), task.fewshot_answer(prompt, ex)) for ex in examples]
        question = task.render(prompt, doc)
        system = [{"role": "system", "content": system_instruction}] if system_instruction else []
        if chat is None or not multiturn:
            shots = "".join(q + TARGET_DELIMITER + a + FEWSHOT_DELIMITER for q, a in turns)
            if chat is None:
                contexts.append((system_instruction or "") + shots + question)
            else:
                contexts.append(chat(system + [{"role": "user", "content": shots + question}]))
        else:
            messages = list(system)
            for q, a in turns:
                messages += [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
            messages.append({"role": "user", "content": question})
            contexts.append(chat(messages))
    return contexts
