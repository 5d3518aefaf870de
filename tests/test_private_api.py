"""No private transformers API in eval/: each transformers release may change or drop what it
does not publish (issue 38). The patterns are the internals a former generator bound to, and any
``_name`` attribute read or written on the transformers objects the evaluator holds (model,
tokenizer, config, generation config, caches, outputs); our own marks on a model are named
``_evalita_*``. A hit fails with file:line."""

from __future__ import annotations

import re
from pathlib import Path

EVAL = Path(__file__).resolve().parent.parent / "eval"

PRIVATE = {
    "subclasses or names transformers' DynamicLayer (a cache internal)": re.compile(r"\bDynamicLayer\b"),
    "reads a tokenizer's private _decode": re.compile(r"\._decode\b"),
    "registers a global attention function (AttentionInterface)": re.compile(r"\bAttentionInterface\b"),
    "reads or swaps config._attn_implementation": re.compile(r"\._attn_implementation\b"),
    "imports a private transformers module or name": re.compile(r"\bfrom transformers[\w.]* import _|\btransformers(\.\w+)*\._[a-z]"),
    "touches a private attribute of a transformers object": re.compile(
        r"\b(model|tokenizer|tok|config|generation_config|past_key_values|kv_cache|outputs?|processor|layers?)\._(?!evalita_)[a-z]\w*"),
}


def private_uses(root: Path = EVAL) -> list[str]:
    hits = []
    for path in sorted(root.rglob("*.py")):
        for number, line in enumerate(path.read_text("utf-8").splitlines(), 1):
            code = line.split("#", 1)[0]
            hits += [f"{path.relative_to(root.parent)}:{number}: {what}: {line.strip()}" for what, pattern in PRIVATE.items() if pattern.search(code)]
    return hits


def test_eval_uses_no_private_transformers_api() -> None:
    hits = private_uses()
    assert hits == [], "\n".join(hits)


def test_the_patterns_catch_what_they_name(tmp_path: Path) -> None:
    # The test above cannot pass by matching nothing: each former use, written out, is caught.
    (tmp_path / "eval").mkdir()
    (tmp_path / "eval" / "former.py").write_text(
        "class Layer(DynamicLayer):\n"
        "    pass\n"
        "if type(tok)._decode is PreTrainedTokenizerFast._decode:\n"
        "    AttentionInterface.register('tree', fn)\n"
        "model.config._attn_implementation = 'tree'\n"
        "from transformers.generation.utils import _split\n"
        "n = tokenizer._tokenizer.get_vocab_size()\n"
        "model._evalita_keep_mask = True  # ours: allowed\n"
        "self._cache = None  # ours: allowed\n", "utf-8")
    hits = private_uses(tmp_path / "eval")
    assert [h.split(":")[1] for h in hits] == ["1", "3", "4", "5", "5", "6", "7"], hits
