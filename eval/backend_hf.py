"""The plain Hugging Face transformers backend, batched, with lm-evaluation-harness's conventions.

Log-likelihoods: requests sorted by length (longest first), right-padded, one
forward pass per batch, left-truncated to the model's maximum length, exactly as
lm-eval's ``HFLM._loglikelihood_tokens``. Generation: greedy, left-padded batches,
context left-truncated to ``max_length - max_new_tokens``, output cut at the first
stop string (the EOS string included), as ``HFLM.generate_until``.
"""

from __future__ import annotations

from typing import Any, Sequence

from .api import Capabilities, GenRequest, LLRequest, LLResult, cut_at_stop, default_add_special_tokens, encode_request

DEFAULT_MAX_LENGTH = 2048  # lm-eval's default when neither config nor tokenizer says
_TOKENIZER_INFINITY = 1000000000000000019884624838656


def resolve_max_length(config: Any, tokenizer: Any) -> int:
    """lm-eval's ``resolve_max_length``: config n_positions/max_position_embeddings/n_ctx, else tokenizer."""
    cfg = getattr(config, "text_config", None) or config
    for attr in ("n_positions", "max_position_embeddings", "n_ctx"):
        value = getattr(cfg, attr, None)
        if value is not None:
            return int(value)
    mml = getattr(tokenizer, "model_max_length", None)
    if mml is not None and mml != _TOKENIZER_INFINITY:
        return int(mml)
    return DEFAULT_MAX_LENGTH


def _torch_dtype(dtype: str) -> Any:
    import torch

    if dtype == "auto":
        return "auto"
    try:
        return {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}[dtype]
    except KeyError:
        raise ValueError(f"unknown dtype {dtype!r}; use auto, float32, float16 or bfloat16") from None


class HFBackend:
    """A ``Backend`` on ``AutoModelForCausalLM``; loads nothing remote unless the id is a Hub id."""

    # Constrained requests: an xgrammar logits processor in generate (eval/constrained.py).
    capabilities = Capabilities(constrained=True)
    _grammars = None

    def __init__(
        self,
        model: str,
        *,
        revision: str | None = None,
        device: str = "cpu",
        dtype: str = "auto",
        batch_size: int = 8,
        trust_remote_code: bool = False,
        max_length: int | None = None,
    ) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if batch_size < 1:
            raise ValueError(f"batch size must be at least 1, got {batch_size}")
        if device.startswith("cuda") and not torch.cuda.is_available():
            raise RuntimeError("--device cuda was asked for but torch sees no CUDA device")
        self.name_or_path = model
        self.revision = revision
        self.batch_size = batch_size
        self.tokenizer = AutoTokenizer.from_pretrained(model, revision=revision, trust_remote_code=trust_remote_code)
        self.model = AutoModelForCausalLM.from_pretrained(
            model, revision=revision, dtype=_torch_dtype(dtype), trust_remote_code=trust_remote_code
        ).to(device)
        self.model.eval()
        self.dtype = str(self.model.dtype).removeprefix("torch.")
        self.device = torch.device(device)
        # lm-eval's configure_pad_token: pad with unk, else eos, when there is no pad token.
        if self.tokenizer.pad_token_id is None:
            if self.tokenizer.unk_token is not None:
                self.tokenizer.pad_token_id = self.tokenizer.unk_token_id
            else:
                self.tokenizer.pad_token_id = self.tokenizer.eos_token_id
        self.max_length = max_length or resolve_max_length(self.model.config, self.tokenizer)

    def fast(self, max_batch_tokens: int | None = None) -> "Any":
        """A FastBackend on this model and tokenizer (shared prefixes, token-budget batches)."""
        from .fast import FastBackend

        backend = FastBackend(self.model, self.tokenizer, max_length=self.max_length, max_batch_tokens=max_batch_tokens, device=self.device)
        backend.apply_chat_template = self.apply_chat_template  # type: ignore[attr-defined]
        backend.dtype = self.dtype  # type: ignore[attr-defined]
        # Constrained requests take this backend's generate path (eval/constrained.py).
        backend.generate_until = _constrained_via(self.generate_until, backend.generate_until)  # type: ignore[method-assign]
        backend.capabilities = self.capabilities  # type: ignore[misc]
        return backend

    # -- chat ---------------------------------------------------------------------------
    def apply_chat_template(self, messages: list[dict[str, str]]) -> str:
        if not getattr(self.tokenizer, "chat_template", None):
            raise ValueError(f"model {self.name_or_path} has no chat template; run without --apply-chat-template")
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    # -- log-likelihood -----------------------------------------------------------------
    def loglikelihood(self, requests: Sequence[LLRequest]) -> list[LLResult]:
        import torch

        encoded = [encode_request(self.tokenizer, r) for r in requests]
        for req, (_ctx, cont) in zip(requests, encoded):
            if not cont:
                raise ValueError(f"continuation {req.continuation!r} encodes to no tokens")
            if len(cont) > self.max_length:
                raise ValueError(f"continuation {req.continuation[:40]!r}... has {len(cont)} tokens, more than the model's maximum length {self.max_length}")
        # Longest first, as lm-eval's Collator; ties keep the input order.
        order = sorted(range(len(requests)), key=lambda i: -len(encoded[i][0] + encoded[i][1]))
        out: list[LLResult | None] = [None] * len(requests)
        with torch.inference_mode():
            for start in range(0, len(order), self.batch_size):
                batch = order[start : start + self.batch_size]
                inputs, conts = [], []
                for i in batch:
                    ctx, cont = encoded[i]
                    inputs.append((ctx + cont)[-(self.max_length + 1) :][:-1])
                    conts.append(cont)
                width = max(len(x) for x in inputs)
                # Right padding without an attention mask: a causal model's logits at the
                # real positions do not depend on what follows them (lm-eval does the same).
                ids = torch.zeros((len(batch), width), dtype=torch.long)
                for row, inp in enumerate(inputs):
                    ids[row, : len(inp)] = torch.tensor(inp, dtype=torch.long)
                logits = self.model(ids.to(self.device)).logits.float()
                logprobs = torch.log_softmax(logits, dim=-1)
                for row, i in enumerate(batch):
                    n_in, cont = len(inputs[row]), conts[row]
                    lp = logprobs[row, n_in - len(cont) : n_in]
                    target = torch.tensor(cont, device=lp.device)
                    picked = lp.gather(1, target[:, None])[:, 0]
                    greedy = bool((lp.argmax(dim=-1) == target).all())
                    out[i] = LLResult(float(picked.sum()), greedy, len(cont))
        return out  # type: ignore[return-value]

    # -- generation ---------------------------------------------------------------------
    def generate_until(self, requests: Sequence[GenRequest]) -> list[str]:
        import torch

        eos = self.tokenizer.decode([self.tokenizer.eos_token_id], skip_special_tokens=False)
        out: list[str | None] = [None] * len(requests)
        groups: dict[tuple, list[int]] = {}
        for i, r in enumerate(requests):
            groups.setdefault((r.stop, r.max_new_tokens, r.constraint is not None), []).append(i)
        for (stop, max_new, constrained), idx in groups.items():
            until = list(stop) + ([eos] if eos not in stop else [])
            max_ctx = self.max_length - max_new
            if max_ctx <= 0:
                raise ValueError(f"max_new_tokens {max_new} leaves no room for the prompt in max length {self.max_length}")
            lengths = {i: len(self.tokenizer.encode(requests[i].context)) for i in idx}
            idx = sorted(idx, key=lambda i: -lengths[i])
            for start in range(0, len(idx), self.batch_size):
                batch = idx[start : start + self.batch_size]
                contexts = [requests[i].context for i in batch]
                special = default_add_special_tokens(self.tokenizer, contexts[0])
                self.tokenizer.padding_side = "left"
                enc = self.tokenizer(contexts, padding="longest", return_tensors="pt", add_special_tokens=special)
                ids = enc["input_ids"][:, -max_ctx:].to(self.device)
                mask = enc["attention_mask"][:, -max_ctx:].to(self.device)
                processors = [self._grammar_processor([requests[i].constraint for i in batch])] if constrained else None
                with torch.inference_mode():
                    gen = self.model.generate(
                        logits_processor=processors,
                        input_ids=ids,
                        attention_mask=mask,
                        max_new_tokens=max_new,
                        do_sample=False,
                        stop_strings=[s for s in until if s],
                        tokenizer=self.tokenizer,
                        pad_token_id=self.tokenizer.pad_token_id,
                        use_cache=True,
                    )
                for row, i in enumerate(batch):
                    text = self.tokenizer.decode(gen[row, ids.shape[1] :].tolist(), skip_special_tokens=True)
                    out[i] = cut_at_stop(text, until)
        return out  # type: ignore[return-value]

    def _grammar_processor(self, constraints: list) -> Any:
        from .constrained import GrammarCache

        if self._grammars is None:
            self._grammars = GrammarCache(self.tokenizer, self.model.config.vocab_size)
        return self._grammars.logits_processor(constraints)


def _constrained_via(constrained_path: Any, free_path: Any) -> Any:
    """generate_until that sends constrained requests to ``constrained_path``, the others to ``free_path``."""

    def generate_until(requests: Sequence[GenRequest]) -> list[str]:
        out: list[str | None] = [None] * len(requests)
        for path, wanted in ((constrained_path, True), (free_path, False)):
            idx = [i for i, r in enumerate(requests) if (r.constraint is not None) == wanted]
            if idx:
                for i, text in zip(idx, path([requests[i] for i in idx])):
                    out[i] = text
        return out  # type: ignore[return-value]

    return generate_until
