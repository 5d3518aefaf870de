"""Bench data: TE, FAQ and AT test records and their multiple-choice requests.

TE and AT have no public raw data, so their records are synthetic (seeded) with the
lengths of the real ones: TE text1 40-80 words and text2 10-20 words; AT a question of
about 30 words and five options of 5-15 words. The words come from the committed
Italian raw files. FAQ is built from the real knowledge base (raw/faq): each FAQ's own
answer among three answers of other FAQs, in a seeded shuffle. Every record is checked
against its task's JSON Schema.
"""

from __future__ import annotations

import csv
import random
import re
from dataclasses import dataclass
from pathlib import Path

from evalita_data.jsonl import write_jsonl
from evalita_data.registry import get_task
from evalita_data.schema_check import record_problems
from evalita_data.taskspec import MCPrompt
from evalita_eval.api import LLRequest
from jinja2.sandbox import SandboxedEnvironment

REPO = Path(__file__).resolve().parent.parent
FAQ_CSV = REPO / "raw/faq/faqs_uft8_QA.csv"
LETTERS = "ABCDE"


def _faq_rows() -> list[dict]:
    with open(FAQ_CSV, encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh, delimiter=";"))


def _word_pool() -> list[str]:
    words = []
    for row in _faq_rows():
        words += re.findall(r"[A-Za-zÀ-ÿ']+", row["question"] + " " + row["answer"])
    return words


def _sentence(rng: random.Random, pool: list[str], lo: int, hi: int) -> str:
    words = [rng.choice(pool) for _ in range(rng.randint(lo, hi))]
    return " ".join(words).capitalize() + "."


def te_records(n: int = 400, seed: int = 0) -> list[dict]:
    rng, pool = random.Random(seed), _word_pool()
    return [
        {"id": str(i + 1), "entailment": rng.choice(["SI", "NO"]), "text1": _sentence(rng, pool, 40, 80), "text2": _sentence(rng, pool, 10, 20)}
        for i in range(n)
    ]


def at_records(n: int = 500, seed: int = 1) -> list[dict]:
    rng, pool = random.Random(seed), _word_pool()
    out = []
    for i in range(n):
        rec = {"Id": str(i + 1), "Question": _sentence(rng, pool, 20, 40)}
        rec.update({letter: _sentence(rng, pool, 5, 15) for letter in LETTERS})
        rec["Correct"] = rng.choice(LETTERS)
        out.append(rec)
    return out


def faq_records(n: int = 401, seed: int = 1234) -> list[dict]:
    rng = random.Random(seed)
    rows = _faq_rows()
    out = []
    for k, row in enumerate(rows[:n]):
        others = [r["answer"] for j, r in enumerate(rows) if j != k and r["answer"] != row["answer"]]
        options = [row["answer"]] + rng.sample(others, 3)
        rng.shuffle(options)
        rec = {"id": row["id"], "question": row["question"], "correct_answer": LETTERS[options.index(row["answer"])]}
        rec.update(dict(zip(LETTERS, options)))
        out.append(rec)
    return out


BUILDERS = {"te": te_records, "faq": faq_records, "at": at_records}


def build(task_id: str, out_dir: Path) -> Path:
    """Write the task's bench records to ``out_dir/<task>.jsonl`` after checking them against the schema."""
    records = BUILDERS[task_id]()
    for rec in records:
        problems = record_problems(task_id, rec)
        if problems:
            raise ValueError(f"bench record {task_id}/{rec}: {problems}")
    path = Path(out_dir) / f"{task_id}.jsonl"
    write_jsonl(path, records)
    return path


@dataclass(frozen=True)
class MCItem:
    task: str
    prompt: str
    context: str
    choices: list[str]

    def requests(self) -> list[LLRequest]:
        # lm-eval's target delimiter: one space before each choice.
        return [LLRequest(self.context, " " + c) for c in self.choices]


_ENV = SandboxedEnvironment()


def mc_items(task_id: str, prompt_name: str, records: list[dict]) -> list[MCItem]:
    prompt = get_task(task_id).prompt(prompt_name)
    if not isinstance(prompt, MCPrompt):
        raise ValueError(f"{task_id}/{prompt_name} is not a multiple-choice prompt")
    template = _ENV.from_string(prompt.template)
    choices_expr = _ENV.compile_expression(prompt.choices) if isinstance(prompt.choices, str) else None
    items = []
    for rec in records:
        choices = list(choices_expr(**rec)) if choices_expr else list(prompt.choices)
        items.append(MCItem(task_id, prompt_name, template.render(**rec), [str(c) for c in choices]))
    return items


# Words per template variable in the synthetic records of the other tasks (lengths of
# the real records, roughly); unlisted variables get DEFAULT_WORDS.
FIELD_WORDS = {
    "sentence1": 25, "sentence2": 25, "w1": 1, "w2": 1, "text": 30, "full_text": 30,
    "context": 40, "source": 400,
}
DEFAULT_WORDS = 20


def eval_size(task_id: str) -> int:
    """Rows of the task's evaluation split in the paper (NER: summed over its domains)."""
    spec = get_task(task_id)
    return sum(n for key, n in spec.paper_splits.items() if key.split("/")[-1] == spec.eval_split)


def synthetic_records(task_id: str, n: int, seed: int = 0) -> list[dict]:
    """Records with every variable the task's prompts read, filled with Italian-looking words."""
    from jinja2 import meta

    if task_id in BUILDERS:
        return BUILDERS[task_id]()[:n]
    spec = get_task(task_id)
    names: set[str] = set()
    for p in spec.prompts:
        names |= meta.find_undeclared_variables(_ENV.parse(p.template))
    rng, pool = random.Random(seed), _word_pool()
    return [{name: _sentence(rng, pool, FIELD_WORDS.get(name, DEFAULT_WORDS), FIELD_WORDS.get(name, DEFAULT_WORDS)) for name in sorted(names)} for _ in range(n)]


def gen_contexts(task_id: str, prompt_name: str, records: list[dict]) -> list[str]:
    template = _ENV.from_string(get_task(task_id).prompt(prompt_name).template)
    return [template.render(**rec) for rec in records]
