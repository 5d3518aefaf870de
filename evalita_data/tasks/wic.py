"""WiC-ITA (Evalita 2023): word in context, monolingual binary subtask."""

from ..scoring.metrics import ACC, ACC_BYTES, ACC_NORM, F1_BINARY, F1_MACRO

from ..taskspec import HubSplits, InstructPrompts, TaskSpec, six_mc_prompts


def check_record(rec: dict) -> list[str]:
    """Offsets lie inside their sentence and delimit a non-empty span."""
    problems = []
    for n in ("1", "2"):
        sentence, start, end = rec[f"sentence{n}"], rec[f"start{n}"], rec[f"end{n}"]
        if not (0 <= start < end <= len(sentence)):
            problems.append(
                f"start{n}/end{n}: span {start}:{end} is not inside sentence{n} (length {len(sentence)})"
            )
        elif sentence[start:end].strip() != sentence[start:end]:
            problems.append(f"start{n}/end{n}: span {sentence[start:end]!r} has surrounding whitespace")
    return problems


_Q = ("La parola: '{{w1}}' nella frase: '{{sentence1}}' ha lo stesso significato della parola: '{{w2}}' nella frase: "
      "'{{sentence2}}'?")
_Q3 = ("La parola '{{w1}}' nella frase '{{sentence1}}' ha lo stesso significato della parola '{{w2}}' nella frase "
       "'{{sentence2}}'?")

TASK = TaskSpec(
    id="wic",
    title="Word in Context (WiC-ITA)",
    source="WiC-ITA, Evalita 2023 (https://github.com/wic-ita/data, commit 3a9ba283)",
    license="unknown (the source repository states none)",
    citation="Cassotti P., Siciliani L., Passaro L., Gatto M., Basile P. (2023). WiC-ITA at EVALITA2023: Overview of "
             "the EVALITA2023 Word-in-Context for ITAlian Task. EVALITA 2023.",
    homepage="https://wic-ita.github.io/",
    obtain_hint="Clone https://github.com/wic-ita/data and copy binary/ and gold_truth/ into raw/wic/.",
    converter="wic:convert",
    schema="wic",
    paper_splits={"train": 2805, "dev": 500, "test": 500},
    id_field="id",
    output_type="multiple_choice",
    target="label",
    derived={"w1": "sentence1[start1:end1]", "w2": "sentence2[start2:end2]"},
    prompts=six_mc_prompts(
        description="Devi determinare se una stessa parola usata in due frasi differenti ha lo stesso significato in "
                    "entrambi i contesti. ",
        question=_Q,
        question_choices=["No", "Sì"],
        p3_question=_Q3,
        answers="\nA: Sì\nB: No\nRisposta:",
        letter_choices=["B", "A"],
        affirmative="La parola: '{{w1}}' nella frase: '{{sentence1}}' e la parola: '{{w2}}' nella frase: "
                    "'{{sentence2}}'",
        affirmative_choices=["non hanno lo stesso significato", "hanno lo stesso significato"],
    ),
    metrics=[F1_MACRO, F1_BINARY, ACC, ACC_NORM, ACC_BYTES],
    order=0,
    eval_split="test",
    fewshot_split="dev",
    record_check=check_record,
    task_categories=["text-classification"],
    instruct=InstructPrompts(
        question=_Q,
        answers=["No", "Sì"],
        description="Devi determinare se una stessa parola usata in due frasi differenti ha lo stesso significato in "
                    "entrambi i contesti. ",
        oe_hint="Rispondi con una sola parola.",
    ),
    hub_splits=HubSplits("word_in_context", config="default"),
)
