"""An 11th task added from outside the package (tests/test_registry_e2e.py): European capitals,
as multiple choice (``capitals``), as open generation (``capitals_gen``) and as a generative
yes/no question with a declared answer format (``capitals_yesno``), over the same raw file.

Registered by ``EVALITA_TASK_PATH=tests/extra_tasks``; nothing in evalita_data or eval names it.
"""

from pathlib import Path

from evalita_data.taskspec import GenPrompt, MCPrompt, Metric, TaskSpec
from evalita_data.scoring.metrics import ACC, ACC_NORM

from .capitals_convert import convert

HERE = Path(__file__).resolve().parent


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


# A metric of this task only: the generation, stripped, is the capital.
EXACT_MATCH = Metric("exact_match", lambda s: float(s["generation"].strip() == s["gold"]), _mean)
# capitals_yesno asks whether city A is the capital: "Sì" is right when the answer is A.
YESNO_MATCH = Metric("yesno_match", lambda s: float((s["generation"] == "Sì") == (s["gold"] == "A")), _mean)

COMMON = dict(
    title="European capitals (test task)",
    source="written for the tests of evalita-llm",
    license="CC0",
    citation="none",
    homepage="https://example.org/capitals",
    obtain_hint="The file is tests/extra_tasks/raw/capitals/capitals.tsv of the evalita-llm repository.",
    converter=convert,
    schema=HERE / "capitals.schema.json",
    paper_splits={"dev": 1, "test": 2},
    id_field="id",
    eval_split="test",
    fewshot_split="dev",
    raw_folder="capitals",
)

TASKS = [
    TaskSpec(
        id="capitals",
        output_type="multiple_choice",
        target="['A', 'B'].index(answer)",
        prompts=[
            MCPrompt("p1", "Qual è la capitale di {{country}}?", "[A, B]"),
            MCPrompt("p2", "Domanda: qual è la capitale di {{country}}?\nA: {{A}}\nB: {{B}}\nRisposta:", ["A", "B"]),
        ],
        metrics=[ACC, ACC_NORM],
        **COMMON,
    ),
    TaskSpec(
        id="capitals_gen",
        output_type="generate_until",
        target="{{ capital }}",
        gold_field="capital",
        prompts=[
            GenPrompt("p1", "Qual è la capitale di {{country}}? Risposta:"),
            GenPrompt("p2", "Rispondi con una parola. La capitale di {{country}} è"),
        ],
        metrics=[EXACT_MATCH],
        stop=["\n"],
        max_new_tokens=8,
        **COMMON,
    ),
    TaskSpec(
        id="capitals_yesno",
        output_type="generate_until",
        target="{% if answer == 'A' %}Sì{% else %}No{% endif %}",
        gold_field="answer",
        prompts=[
            GenPrompt("p1", "{{A}} è la capitale di {{country}}? Rispondi Sì o No:"),
            GenPrompt("p2", "Domanda: la capitale di {{country}} è {{A}}? Risposta (Sì/No):"),
        ],
        metrics=[YESNO_MATCH],
        # The answer format: --constrained generates only these answers, results.json counts the others.
        output_pattern="Sì|No",
        output_closings=("Sì", "No"),
        stop=["\n"],
        max_new_tokens=4,
        **COMMON,
    ),
]
