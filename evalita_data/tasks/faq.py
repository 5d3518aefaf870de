"""QA4FAQ (Evalita 2016), rebuilt as 4-way multiple choice over the FAQ answers."""

from ..record_checks import choice_problems
from ..scoring.metrics import ACC, ACC_BYTES, ACC_NORM

from ..taskspec import HubSplits, InstructPrompts, TaskSpec, six_mc_prompts


def check_record(rec: dict) -> list[str]:
    """correct_answer names one of A-D; the four option texts differ."""
    return choice_problems(rec, ["A", "B", "C", "D"], "correct_answer")


_Q = "Rispondi alla seguente domanda: '{{question}}'"
_DESC = "Devi risolvere un compito di risposte a domande. "

TASK = TaskSpec(
    id="faq",
    title="Frequently Asked Questions (QA4FAQ), multiple choice",
    source="QA4FAQ, Evalita 2016, AQP Risponde knowledge base (https://github.com/evalita2016/data, commit dad1265a)",
    license="CC BY-NC-SA 3.0 IT",
    citation="Caputo A., de Gemmis M., Lops P., Lovecchio F., Manzari V. (2016). Overview of the EVALITA 2016 Question "
             "Answering for Frequently Asked Questions (QA4FAQ) Task. EVALITA 2016.",
    homepage="http://qa4faq.github.io/",
    obtain_hint="Copy qa4faq/qa4faq_dev_v3/faqs_uft8_QA.{csv,xml} of https://github.com/evalita2016/data into "
                "raw/faq/.",
    converter="faq:convert",
    schema="faq",
    paper_splits={"dev": 5, "test": 401},
    id_field="id",
    output_type="multiple_choice",
    target="['A', 'B', 'C', 'D'].index(correct_answer)",
    prompts=six_mc_prompts(
        description=_DESC,
        question=_Q,
        question_choices="[A, B, C, D]",
        answers="\nA: {{A}}\nB: {{B}}\nC: {{C}}\nD: {{D}}\nRisposta:",
        letter_choices=["A", "B", "C", "D"],
        p4_description="Devi risolvere un compito a scelta multipla. ",
        affirmative="La risposta alla domanda: '{{question}}' è:",
        affirmative_choices="[A, B, C, D]",
    ),
    metrics=[ACC, ACC_NORM, ACC_BYTES],
    order=4,
    eval_split="test",
    fewshot_split="dev",
    record_check=check_record,
    seed=1234,
    task_categories=["question-answering", "multiple-choice"],
    instruct=InstructPrompts(
        question=_Q,
        answers="[A, B, C, D]",
        description=_DESC,
        oe_hint="Rispondi con il testo della risposta, senza commenti.",
    ),
    hub_splits=HubSplits("faq", test="test_1", fewshot="dev_1"),
)
