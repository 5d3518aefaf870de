"""Italian medical specialty admission tests (SSM), five-option multiple choice."""

from ..record_checks import choice_problems
from ..scoring.metrics import ACC, ACC_BYTES, ACC_NORM

from ..taskspec import HubSplits, InstructPrompts, TaskSpec, six_mc_prompts


def check_record(rec: dict) -> list[str]:
    """Correct names one of A-E; the five option texts differ."""
    return choice_problems(rec, ["A", "B", "C", "D", "E"], "Correct")


TASK = TaskSpec(
    id="at",
    title="Admission Tests (Italian medical specialty exams)",
    source="Italian medical specialty (SSM) admission tests 2017, 2018, 2019, 2022 (Casola et al., CLiC-it 2023), "
           "Excel workbooks",
    license="see the original distribution (not public)",
    citation="Casola S., Labruna T., Lavelli A., Magnini B. (2023). Testing ChatGPT for Stability and Reasoning: A "
             "Case Study Using Italian Medical Specialty Tests. CLiC-it 2023.",
    homepage="https://ceur-ws.org/Vol-3596/",
    obtain_hint="No public copy was found. Ask the authors of Casola et al. (CLiC-it 2023) for the Excel workbooks and "
                "put them in raw/at/ (see raw/at/README.md for the accepted layout).",
    converter="at:convert",
    schema="at",
    paper_splits={"dev": 21, "test": 500},
    id_field="Id",
    output_type="multiple_choice",
    target="['A', 'B', 'C', 'D', 'E'].index(Correct)",
    prompts=six_mc_prompts(
        description="Devi risolvere un compito di risposte a domande. ",
        question="Dato il seguente quesito di medicina: '{{Question}}' qual è la risposta corretta?",
        question_choices="[A, B, C, D, E]",
        answers="\nA: {{A}}\nB: {{B}}\nC: {{C}}\nD: {{D}}\nE: {{E}}\nRisposta:",
        letter_choices=["A", "B", "C", "D", "E"],
        p4_description="Devi risolvere un compito a scelta multipla. ",
        affirmative="Dato il seguente quesito di medicina '{{Question}}' la risposta corretta è:",
        affirmative_choices="[A, B, C, D, E]",
    ),
    metrics=[ACC, ACC_NORM, ACC_BYTES],
    order=5,
    eval_split="test",
    fewshot_split="dev",
    record_check=check_record,
    seed=1234,
    task_categories=["question-answering", "multiple-choice"],
    instruct=InstructPrompts(
        question="Dato il seguente quesito di medicina: '{{Question}}' qual è la risposta corretta?",
        answers="[A, B, C, D, E]",
        description="Devi risolvere un compito di risposte a domande. ",
        oe_hint="Rispondi con il testo della risposta, senza commenti.",
    ),
    hub_splits=HubSplits("admission_test"),
)
