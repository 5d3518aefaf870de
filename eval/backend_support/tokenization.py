"""The one tokenisation of every token-level backend (``hf``, ``vllm``, ``openai`` with a local tokenizer):
lm-evaluation-harness 0.4.x's HF rules, as its ``TemplateLM`` keeps them in one place (docs/evaluator.md)."""

from __future__ import annotations

from typing import Any

from ..api import LLRequest


def prefix_token_id(tokenizer: Any) -> int:
    """The token lm-eval puts before an empty context (BOS, else EOS)."""
    return tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id


def default_add_special_tokens(tokenizer: Any, text: str) -> bool:
    """lm-eval's HF rule: special tokens (a Llama's BOS) added unless the text starts with the BOS string (a rendered
    chat template)."""
    return not text.startswith(tokenizer.decode([prefix_token_id(tokenizer)]))


def encode_pair(tokenizer: Any, context: str, continuation: str) -> tuple[list[int], list[int]]:
    """(context ids, continuation ids) as lm-eval 0.4.x computes them: the context's trailing whitespace moved to the
    continuation, whose tokens are those of ``encode(context + continuation)`` after ``len(encode(context))``, special
    tokens by ``default_add_special_tokens``."""
    n_spaces = len(context) - len(context.rstrip())
    if n_spaces > 0:
        continuation = context[-n_spaces:] + continuation
        context = context[:-n_spaces]
    special = default_add_special_tokens(tokenizer, context + continuation)
    ctx = tokenizer.encode(context, add_special_tokens=special)
    return ctx, tokenizer.encode(context + continuation, add_special_tokens=special)[len(ctx):]


def encode_request(tokenizer: Any, req: LLRequest) -> tuple[list[int], list[int]]:
    """(context ids, continuation ids) of one request: ``encode_pair``, and an empty context becomes lm-eval's prefix
    token."""
    if req.context == "":
        special = default_add_special_tokens(tokenizer, req.continuation)
        return [prefix_token_id(tokenizer)], tokenizer.encode(req.continuation, add_special_tokens=special)
    return encode_pair(tokenizer, req.context, req.continuation)


def render_chat(tokenizer: Any, model_name: str, messages: list[dict[str, str]], **template_kwargs: Any) -> str:
    """The prompt string of chat messages under the tokenizer's template (every local-tokenizer backend);
    ``template_kwargs``: variables the template reads (``enable_thinking``, running/thinking_run.py)."""
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError(f"model {model_name} has no chat template; run without --apply-chat-template")
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, **template_kwargs)
