"""HaSpeeDe 2 (Evalita 2020): hate speech detection, task A."""

from ..scoring.metrics import ACC, ACC_BYTES, ACC_NORM, F1_BINARY, F1_MACRO

from ..taskspec import HubSplits, InstructPrompts, TaskSpec, six_mc_prompts

_Q = "C'è incitamento all'odio nel seguente tweet: '{{full_text}}'?"

TASK = TaskSpec(
    id="hs",
    title="Hate Speech Detection (HaSpeeDe 2)",
    source="HaSpeeDe 2, Evalita 2020 (official: https://github.com/msang/haspeede 2020/; public copy of the TSVs: "
           "https://github.com/eliabisconti/haspeede, commit df38fe87)",
    license="CC BY-NC-SA 4.0",
    citation="Sanguinetti M., Comandini G., Di Nuovo E., Frenda S., Stranisci M., Bosco C., Caselli T., Patti V., "
             "Russo I. (2020). HaSpeeDe 2 @ EVALITA2020: Overview of the EVALITA 2020 Hate Speech Detection Task. "
             "EVALITA 2020.",
    homepage="http://www.di.unito.it/~tutreeb/haspeede-evalita20/",
    obtain_hint=(
        "The gold test labels are in haspeede2_reference.zip of https://github.com/msang/haspeede "
        "(2020/; password after the registration form). Put haspeede2_reference_taskAB-tweets.tsv and "
        "haspeede2_reference_taskAB-news.tsv in raw/hs/."
    ),
    converter="hs:convert",
    schema="hs",
    paper_splits={"dev": 6839, "test_all": 1763, "test_tweets": 1263, "test_news": 500},
    id_field="id",
    output_type="multiple_choice",
    target="hs",
    prompts=six_mc_prompts(
        description="Devi svolgere un compito di identificazione di incitamento all'odio. ",
        question=_Q,
        question_choices=["Falso", "Vero"],
        answers="\nA: Vero\nB: Falso\nRisposta:",
        p4_answers="\nA: Sì\nB: No\nRisposta:",
        letter_choices=["B", "A"],
        affirmative="Il tweet: '{{full_text}}'",
        affirmative_choices=["non contiene incitamento all'odio", "contiene incitamento all'odio"],
    ),
    metrics=[F1_MACRO, F1_BINARY, ACC, ACC_NORM, ACC_BYTES],
    order=3,
    eval_split="test_all",
    fewshot_split="dev",
    task_categories=["text-classification"],
    instruct=InstructPrompts(
        question=_Q,
        answers=["No", "Sì"],
        description="Devi svolgere un compito di identificazione di incitamento all'odio. ",
        oe_hint="Rispondi con una sola parola.",
    ),
    hub_splits=HubSplits("hatespeech_detection", test="test_all"),
)
