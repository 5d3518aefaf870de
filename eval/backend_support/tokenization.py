"""The one tokenisation of every token-level backend (``hf``, ``vllm``, ``openai`` with a local tokenizer):
lm-evaluation-harness 0.4.x's HF rules, as its ``TemplateLM`` keeps them in one place (docs/evaluator.md).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from ..api import LLRequest

Key = tuple[str, bool]  # (text, add special tokens)
EncodeTexts = Callable[[list[Key]], dict[Key, list[int]]]


def prefix_token_id(tokenizer: Any) -> int:
    """The token lm-eval puts before an empty context (BOS, else EOS)."""
    return tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id


def default_add_special_tokens(tokenizer: Any, text: str) -> bool:
    """lm-eval's HF rule: special tokens (a Llama's BOS) added unless the text starts with the BOS string (a rendered
    chat template)."""
    return not text.startswith(tokenizer.decode([prefix_token_id(tokenizer)]))


def one_text_at_a_time(tokenizer: Any) -> EncodeTexts:
    """``EncodeTexts`` by ``tokenizer.encode``, each distinct text once."""
    return lambda keys: {key: tokenizer.encode(key[0], add_special_tokens=key[1]) for key in dict.fromkeys(keys)}


def _pair_keys(tokenizer: Any, context: str, continuation: str, add_special_tokens: bool | None) -> tuple[Key, Key]:
    """(context, context + continuation) to encode: trailing whitespace moved to the continuation."""
    n_spaces = len(context) - len(context.rstrip())
    if n_spaces > 0:
        continuation = context[-n_spaces:] + continuation
        context = context[:-n_spaces]
    if add_special_tokens is None:
        add_special_tokens = default_add_special_tokens(tokenizer, context + continuation)
    return (context, add_special_tokens), (context + continuation, add_special_tokens)


def encode_pair(tokenizer: Any, context: str, continuation: str, add_special_tokens: bool | None = None
                ) -> tuple[list[int], list[int]]:
    """(context ids, continuation ids) as lm-eval 0.4.x computes them: the context's trailing whitespace moved to the
    continuation, whose tokens are those of ``encode(context + continuation)`` after ``len(encode(context))``;
    ``add_special_tokens=None``: ``default_add_special_tokens``."""
    ctx_key, whole_key = _pair_keys(tokenizer, context, continuation, add_special_tokens)
    ids = one_text_at_a_time(tokenizer)([ctx_key, whole_key])
    ctx = list(ids[ctx_key])
    return ctx, list(ids[whole_key][len(ctx):])


def encode_requests(tokenizer: Any, requests: Sequence[LLRequest],
                    encode_texts: EncodeTexts | None = None) -> list[tuple[list[int], list[int]]]:
    """(context ids, continuation ids) per request: ``encode_pair``, and an empty context becomes lm-eval's prefix
    token. ``encode_texts`` (default: one text at a time) encodes every distinct text the requests need in one call,
    so that a scorer may call its tokenizer in batches and still apply exactly these rules."""
    plans: list[tuple[Key | None, Key]] = []
    for req in requests:
        if req.context == "":
            plans.append((None, (req.continuation, default_add_special_tokens(tokenizer, req.continuation))))
        else:
            plans.append(_pair_keys(tokenizer, req.context, req.continuation, None))
    ids = (encode_texts or one_text_at_a_time(tokenizer))([key for plan in plans for key in plan if key is not None])
    out = []
    for ctx_key, whole_key in plans:
        if ctx_key is None:
            out.append(([prefix_token_id(tokenizer)], list(ids[whole_key])))
            continue
        ctx = list(ids[ctx_key])
        out.append((ctx, list(ids[whole_key][len(ctx):])))
    return out


def encode_request(tokenizer: Any, req: LLRequest) -> tuple[list[int], list[int]]:
    """(context ids, continuation ids) of one request (``encode_requests``)."""
    return encode_requests(tokenizer, [req])[0]


def render_chat(tokenizer: Any, model_name: str, messages: list[dict[str, str]], **template_kwargs: Any) -> str:
    """The prompt string of chat messages under the tokenizer's template (every local-tokenizer backend);
    ``template_kwargs``: variables the template reads (``enable_thinking``, running/thinking_run.py)."""
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError(f"model {model_name} has no chat template; run without --apply-chat-template")
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, **template_kwargs)
