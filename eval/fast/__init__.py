"""Fast exact scoring: shared-prefix log-likelihoods and token-budget batching.

``FastBackend`` implements the :class:`evalita_eval.api.Backend` protocol and returns the
same numbers as :func:`evalita_eval.backends.hf.plain_loglikelihood` (within float rounding):
every distinct token prefix across all requests is computed once (a token trie packed
into one sequence with a tree attention mask), the vocabulary projection runs only at
scored positions, and batches are filled up to a token budget instead of a row count.
"""

from .backend import FastBackend
from .budget import probe_max_batch_tokens

__all__ = ["FastBackend", "probe_max_batch_tokens"]
