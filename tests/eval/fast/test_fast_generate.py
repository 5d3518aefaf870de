"""Continuous batching: who joins a batch, and refilled batches give plain greedy text."""

from __future__ import annotations

import random
from collections import deque

from fast_helpers import tiny_lm  # noqa: F401  (tiny_lm is a fixture)

from evalita_eval.api import GenRequest
from evalita_eval.fast import FastBackend
from evalita_eval.fast import generate as gen
from evalita_eval.fast.reference import plain_generate_until


def test_admissible_fills_up_to_the_budget_and_never_starves():
    need = [30, 20, 20, 10, 100]
    waiting = deque([0, 1, 2, 3])
    # Empty batch: 0 (30), 1 (2 x 30 = 60), 2 (3 x 30 = 90) fit in 100; 3 would make 4 x 30.
    assert gen._admissible(waiting, [], need, 100) == [0, 1, 2] and list(waiting) == [3]
    # Live rows 0 and 1 (width 30): a third row makes 90 <= 100.
    assert gen._admissible(deque([3]), [0, 1], need, 100) == [3]
    assert gen._admissible(deque([3]), [0, 1, 2], need, 100) == []
    # A request wider than the budget still runs, alone.
    assert gen._admissible(deque([4, 3]), [], need, 50) == [4]


def test_refilled_rows_give_plain_greedy_text(request, monkeypatch):
    model, tok = request.getfixturevalue("tiny_lm")
    rng = random.Random(3)
    words = "la frase implica che il contatore dell'acqua domanda risposta è così perché non".split()
    reqs = [
        GenRequest(" ".join(rng.choice(words) for _ in range(rng.randint(1, 30))), tuple(rng.sample(["\n", ",", "e", "a"], rng.randint(0, 2))), rng.randint(1, 12))
        for _ in range(20)
    ]
    joins = []
    original = gen._Rows._join

    def counting(self, new, *args):
        joins.append(len(new))
        return original(self, new, *args)

    monkeypatch.setattr(gen._Rows, "_join", counting)
    got = FastBackend(model, tok, 48, max_batch_tokens=120).generate_until(reqs)
    assert got == plain_generate_until(model, tok, reqs, 48)
    assert joins, "no request joined a live batch"


def test_growing_layer_holds_what_a_dynamic_layer_holds():
    import torch
    from transformers.cache_utils import DynamicLayer

    from evalita_eval.fast.kvcache import GrowingLayer

    gen_ = torch.Generator().manual_seed(0)
    grow, plain = GrowingLayer(), DynamicLayer()

    def both(fn):
        for layer in (grow, plain):
            fn(layer)

    rows = 3
    for step, n in enumerate([7, 1, 1, 30, 1, 100, 1, 1]):
        k, v = torch.randn((rows, 2, n, 4), generator=gen_), torch.randn((rows, 2, n, 5), generator=gen_)
        got, ref = grow.update(k, v), plain.update(k, v)
        assert torch.equal(got[0], ref[0]) and torch.equal(got[1], ref[1])
        if step == 4:  # the batch changes as in generate._Rows: rows leave, padding columns go
            both(lambda layer: layer.batch_select_indices(torch.tensor([0, 2])))
            rows = 2

            def drop(layer):
                layer.keys, layer.values = layer.keys[..., 3:, :], layer.values[..., 3:, :]

            both(drop)
    # Appending one column writes into the spare room: the keys stay a view of one buffer.
    before = grow.keys.data_ptr()
    grow.update(torch.zeros((2, 2, 1, 4)), torch.zeros((2, 2, 1, 5)))
    assert grow.keys.data_ptr() == before and grow.keys.shape == (2, 2, 140, 4)  # 40 - 3 dropped + 102 + 1


def test_prefill_groups_split_where_lengths_drop_by_more_than_the_slack():
    assert gen.prefill_groups([600, 580, 410, 400, 150, 100]) == [[0, 1, 2, 3], [4, 5]]  # 600 <= 1.5 * 400
    assert gen.prefill_groups([10]) == [[0]]
    assert gen.prefill_groups([90, 60, 59]) == [[0, 1], [2]]  # 90 <= 1.5 * 60, 90 > 1.5 * 59


def test_tail_decoder_equals_decode(request):
    _, tok = request.getfixturevalue("tiny_lm")
    rng = random.Random(0)
    seqs = [[rng.randrange(len(tok)) for _ in range(rng.randint(0, 12))] for _ in range(50)]
    seqs.append([tok.eos_token_id, tok.bos_token_id])
    fast = gen.tail_decoder(tok)
    assert "decode_batch" in fast.__code__.co_names  # the tiny tokenizer takes the batched path
    assert fast(seqs) == [tok.decode(s, skip_special_tokens=True) for s in seqs]

    class Cleaning(type(tok)):  # a subclass overriding _decode: decoded row by row, its own way
        def _decode(self, token_ids, **kwargs):
            return "<" + super()._decode(token_ids, **kwargs) + ">"

    cleaning = Cleaning(tokenizer_object=tok.backend_tokenizer)
    assert gen.tail_decoder(cleaning)(seqs[:3]) == ["<" + tok.decode(s, skip_special_tokens=True) + ">" for s in seqs[:3]]


def test_cpu_generation_budget_is_four_gib_of_cache():
    import torch
    from transformers import LlamaConfig

    from evalita_eval.fast.budget import cpu_gen_budget, kv_bytes_per_token

    class Shape:  # what the budget reads of a model: its config and dtype
        def __init__(self, dtype, **kw):
            self.config, self.dtype = LlamaConfig(**kw), dtype

    llama8b = Shape(torch.float32, num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8, hidden_size=4096)
    assert kv_bytes_per_token(llama8b) == 2 * 32 * 8 * 128 * 4  # 256 KiB
    assert cpu_gen_budget(llama8b, 2048) == 16384
    bf16 = Shape(torch.bfloat16, num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8, hidden_size=4096)
    assert cpu_gen_budget(bf16, 2048) == 32768
    tiny = Shape(torch.float32, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1, hidden_size=64)
    assert cpu_gen_budget(tiny, 2048) == 65536  # the ceiling
    huge = Shape(torch.float32, num_hidden_layers=80, num_attention_heads=64, num_key_value_heads=64, hidden_size=8192)
    assert cpu_gen_budget(huge, 4096) == 4096  # never below one request of max_length


def test_sliding_window_model_generates_plain_greedy_text(request, tmp_path):
    """A model with sliding-window layers keeps transformers' own cache and masks (no refill)."""
    import torch
    from transformers import AutoModelForCausalLM, MistralConfig, MistralForCausalLM

    _, tok = request.getfixturevalue("tiny_lm")
    config = MistralConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                           num_key_value_heads=2, sliding_window=8, max_position_embeddings=256, bos_token_id=tok.bos_token_id,
                           eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    torch.manual_seed(0)
    MistralForCausalLM(config).save_pretrained(tmp_path)
    model = AutoModelForCausalLM.from_pretrained(tmp_path, dtype=torch.float32).eval()
    rng = random.Random(5)
    words = "la frase implica che il contatore dell'acqua domanda risposta".split()
    reqs = [GenRequest(" ".join(rng.choice(words) for _ in range(rng.randint(3, 25))), ("\n",), rng.randint(4, 20)) for _ in range(8)]
    assert FastBackend(model, tok, 64, max_batch_tokens=200).generate_until(reqs) == plain_generate_until(model, tok, reqs, 64)


def test_row_runs_by_hand():
    from evalita_eval.fast.decode_attention import row_runs

    # Tolerance max(32, 900 // 8) = 112: rows from column 0 and rows from about 500 are two runs,
    # reading 3 x 900 + 3 x 400 columns instead of 6 x 900.
    assert row_runs([0, 0, 10, 500, 520, 510], 900) == [(0, 3, 0), (3, 6, 500)]
    assert row_runs([0, 5, 0], 900) is None  # one run
    assert row_runs([0, 500, 0, 500, 0], 900) is None  # five runs: more calls than they save
    assert row_runs([0, 0, 0, 0, 150], 900) is None  # saves 150 of 4500 columns: under a fifth


def test_rows_of_very_different_lengths_attend_to_their_own_columns(request, monkeypatch):
    from evalita_eval.fast import decode_attention

    model, tok = request.getfixturevalue("tiny_lm")
    rng = random.Random(11)
    words = "la frase implica che il contatore dell'acqua domanda risposta è così perché non".split()
    reqs = [GenRequest(" ".join(rng.choice(words) for _ in range(n)), ("\n",), 10) for n in (300, 280, 3, 5, 4, 290, 2)]
    grouped = []
    original = decode_attention.row_runs

    def recording(starts, width, **kw):
        runs = original(starts, width, **kw)
        grouped.append(runs is not None)
        return runs

    monkeypatch.setattr(decode_attention, "row_runs", recording)
    got = FastBackend(model, tok, 1024).generate_until(reqs)
    assert any(grouped), "no step attended by runs of rows"
    assert got == plain_generate_until(model, tok, reqs, 1024)
    assert model.config._attn_implementation == "sdpa"  # restored after every step
