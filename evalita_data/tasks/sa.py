"""SENTIPOLC 2016: sentiment polarity of Italian tweets."""

from ..scoring.metrics import ACC, ACC_BYTES, ACC_NORM, SENTIPOLC_F1

from ..taskspec import HubSplits, InstructPrompts, TaskSpec, six_mc_prompts

_CHOICES = ["Positivo", "Negativo", "Neutrale", "Misto"]

TASK = TaskSpec(
    id="sa",
    title="Sentiment Analysis (SENTIPOLC 2016)",
    source="SENTIPOLC 2016, Evalita 2016 (https://github.com/evalita2016/data, commit dad1265a)",
    license="CC BY-NC-SA 3.0 IT (tweets also under Twitter's terms)",
    citation="Barbieri F., Basile V., Croce D., Nissim M., Novielli N., Patti V. (2016). Overview of the Evalita 2016 "
             "SENTIment POLarity Classification Task. EVALITA 2016.",
    homepage="http://www.di.unito.it/~tutreeb/sentipolc-evalita16/",
    obtain_hint="Copy sentipolc/*.csv of https://github.com/evalita2016/data into raw/sa/.",
    converter="sa:convert",
    schema="sa",
    paper_splits={"train": 7410, "test": 2000},
    id_field="idtwitter",
    output_type="multiple_choice",
    # positive (1,0)=0, negative (0,1)=1, neutral (0,0)=2, mixed (1,1)=3
    target="{'10': 0, '01': 1, '00': 2, '11': 3}[opos ~ oneg]",
    prompts=six_mc_prompts(
        description="Devi svolgere un compito di analisi del sentiment. ",
        question="Qual è il sentiment espresso nel seguente tweet: '{{text}}'?",
        question_choices=_CHOICES,
        answers="\nA: Positivo\nB: Negativo\nC: Neutro\nD: Misto\nRisposta:",
        letter_choices=["A", "B", "C", "D"],
        affirmative="Il seguente tweet: '{{text}}' esprime un sentiment",
        affirmative_choices=_CHOICES,
    ),
    metrics=[SENTIPOLC_F1, ACC, ACC_NORM, ACC_BYTES],
    order=2,
    eval_split="test",
    fewshot_split="train",
    task_categories=["text-classification"],
    # The answers as p3/p4 list them ("Neutro", the usual word for a neutral answer).
    instruct=InstructPrompts(
        question="Qual è il sentiment espresso nel seguente tweet: '{{text}}'?",
        answers=["Positivo", "Negativo", "Neutro", "Misto"],
        description="Devi svolgere un compito di analisi del sentiment. ",
        oe_hint="Rispondi con una sola parola.",
        # An unparseable answer counts as the polarity with both axes flipped (lm-eval has no such answer).
        unparsed_as=(1, 0, 3, 2),
    ),
    hub_splits=HubSplits("sentiment_analysis", fewshot="train"),
)
