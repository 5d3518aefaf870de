"""Textual entailment, Evalita 2009 (RTE-style XML)."""

from ..scoring.metrics import ACC, ACC_BYTES, ACC_NORM

from ..taskspec import HubSplits, InstructPrompts, TaskSpec, six_mc_prompts

TASK = TaskSpec(
    id="te",
    title="Textual Entailment (Evalita 2009)",
    source="Evalita 2009 Textual Entailment task (pairs from Wikipedia revision histories)",
    license="CC BY-NC-SA 4.0 (as published by evalitahf/textual_entailment)",
    citation="Bos J., Zanzotto F. M., Pennacchiotti M. (2009). Textual Entailment at EVALITA 2009. EVALITA 2009.",
    homepage="https://www.evalita.it/campaigns/evalita-2009/tasks/textual-entailment/",
    obtain_hint=(
        "No public copy was found. Ask the Evalita 2009 organisers for the RTE XML files "
        "(<pair id=.. entailment=YES|NO|SI><t>..</t><h>..</h></pair>) and put the dev file "
        "(name containing 'dev') and the test file (name containing 'test') in raw/te/."
    ),
    converter="te:convert",
    schema="te",
    paper_splits={"dev": 400, "test": 400},
    id_field="id",
    output_type="multiple_choice",
    target="0 if entailment == 'SI' else 1",
    prompts=six_mc_prompts(
        description="Devi risolvere un compito di inferenza semantica. ",
        question="La frase: '{{text1}}' implica logicamente che la frase: '{{text2}}' sia vera?",
        question_choices=["Sì", "No"],
        answers="\nA: Sì\nB: No\nRisposta:",
        letter_choices=["A", "B"],
        affirmative="Frase 1: '{{text1}}' Frase 2: '{{text2}}'",
        affirmative_choices=[
            "La frase 1 implica logicamente che la frase 2 sia vera",
            "La frase 1 non implica logicamente che la frase 2 sia vera",
        ],
    ),
    metrics=[ACC, ACC_NORM, ACC_BYTES],
    order=1,
    eval_split="test",
    fewshot_split="dev",
    task_categories=["text-classification"],
    instruct=InstructPrompts(
        question="La frase: '{{text1}}' implica logicamente che la frase: '{{text2}}' sia vera?",
        answers=["Sì", "No"],
        description="Devi risolvere un compito di inferenza semantica. ",
        oe_hint="Rispondi con una sola parola.",
    ),
    hub_splits=HubSplits("textual_entailment"),
)
