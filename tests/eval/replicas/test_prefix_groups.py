"""How a vllm call is cut for replicas (eval/replicas/prefix_groups.py), without an engine: the
planner reads only the backend's tokenizer, max length and KV block size, given here (the real
engine runs in test_vllm_replicas.py)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from evalita_eval.api import GenRequest, LLRequest
from evalita_eval.replicas.plan import assign
from evalita_eval.replicas.prefix_groups import CUT_COST, cut_family, prefix_units, shared_tokens


def test_shared_tokens_are_whole_common_blocks() -> None:
    assert shared_tokens([(1, 2, 3, 4, 5), (1, 2, 3, 9), (1, 2, 3, 4)], 2) == 2  # 3 common tokens: one block of 2
    assert shared_tokens([(1, 2, 3, 4), (1, 2, 3, 4)], 2) == 4
    assert shared_tokens([(1, 2), (5, 2)], 1) == 0
    assert shared_tokens([(7, 8, 9)], 4) == 0  # shorter than a block: nothing cached to share


def test_a_family_is_cut_only_where_the_recomputed_blocks_are_cheap() -> None:
    family = [[0, 1], [2, 3], [4, 5]]
    tokens = [10] * 6  # contexts of 20 tokens, 60 in all
    assert cut_family(family, tokens, 20, 0) == [[0, 1], [2, 3], [4, 5]]  # nothing shared: a piece closes at the share
    assert cut_family(family, tokens, 30, 0) == [[0, 1, 2, 3], [4, 5]]
    assert cut_family(family, tokens, 61, 0) == [[0, 1, 2, 3, 4, 5]]
    assert cut_family(family, tokens, 20, 32) == [[0, 1, 2, 3, 4, 5]]  # one more piece would recompute 32 of 60 tokens
    # 200 contexts of 100 tokens under 32 shared tokens: at most 1 + int(1 % x 20,000 / 32) = 7 pieces.
    big = [[i] for i in range(200)]
    assert 1 + int(CUT_COST * 20_000 / 32) == 7
    assert [len(p) for p in cut_family(big, [100] * 200, 10_000, 32)] == [100, 100]  # a share of half: 2 pieces
    # A share of 1,000 would give 20 pieces: raised to 20,000 / 7 = 2,858 tokens, pieces of 29 contexts.
    assert [len(p) for p in cut_family(big, [100] * 200, 1_000, 32)] == [29] * 6 + [26]


def _engine_like(tiny_model: Path, block: int) -> SimpleNamespace:
    from evalita_eval.backends.engine_common import load_tokenizer

    return SimpleNamespace(tokenizer=load_tokenizer(str(tiny_model), None, False), max_length=512, prefix_block_size=lambda: block)


def test_contexts_stay_whole_and_families_together(tiny_model: Path) -> None:
    backend = _engine_like(tiny_model, 4)
    rule = "Devi determinare se una stessa parola usata in due frasi differenti ha lo stesso significato in entrambi i contesti. "
    docs = ["La chiave della porta è rotta.", "Ho letto un libro giallo.", "Il film era noioso."]
    requests = [LLRequest(rule + d + " Risposta:", x) for d in docs for x in (" Sì", " No")]  # one family of three contexts
    requests += [LLRequest(f"{d} Il sentimento è", x) for d in docs for x in (" positivo", " negativo")]  # a family per document
    requests.append(LLRequest("Qual è la capitale?", ""))  # refused by the engine (no continuation tokens): a unit of its own
    units = prefix_units(backend, "loglikelihood", requests, 2)
    got = sorted(sorted(u.indices) for u in units)
    assert got == [[0, 1, 2, 3, 4, 5], [6, 7], [8, 9], [10, 11], [12]]
    assert all(len(u.calls) == 1 for u in units)  # a unit is one engine call
    # The instruction family is the largest unit; the others balance against it.
    shards = assign([u.tokens for u in units], 2)
    assert sorted(len(s) for s in shards) == [1, 4]
    gens = prefix_units(backend, "generate_until", [GenRequest(rule + d, (), 8) for d in docs], 2)
    assert [sorted(u.indices) for u in gens] == [[0, 1, 2]] and gens[0].tokens > 3 * 8
