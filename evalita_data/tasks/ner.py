"""KIND / NERMuD (Evalita 2023): named entities in three domains."""

from ..scoring.metrics import NER_F1, NER_F1_STRICT
from ..scoring.parsers import NO_ENT, PAIR_PIECE

from ..taskspec import HubSplits, TaskSpec, two_gen_prompts

DOMAINS = ["adg", "fic", "wn"]
_TYPED = rf"{PAIR_PIECE}\$(PER|LOC|ORG)"
# The answer format the prompt asks for: Entità$TIPO,Entità$TIPO (TIPO one of PER, LOC, ORG), or &&NOENT&&.
OUTPUT_PATTERN = rf"{NO_ENT}|{_TYPED}(, ?{_TYPED})*"


def check_record(rec: dict) -> list[str]:
    """Every entity text occurs in the text, in order of appearance and without overlap."""
    problems = []
    text, pos = rec["text"], 0
    for i, ent in enumerate(rec["entities"]):
        found = text.find(ent["entity_text"], pos)
        if found >= 0:
            pos = found + len(ent["entity_text"])
        elif ent["entity_text"] in text:
            problems.append(f"entities.{i}.entity_text: {ent['entity_text']!r} is not after the previous entity in "
                            "text")
        else:
            problems.append(f"entities.{i}.entity_text: {ent['entity_text']!r} does not occur in text")
    return problems

TASK = TaskSpec(
    id="ner",
    title="Named Entity Recognition (KIND, NERMuD 2023)",
    source="KIND corpus, NERMuD at Evalita 2023 (https://github.com/dhfbk/KIND, commit a2ad1391, evalita-2023/)",
    license="CC BY-NC-SA 4.0 (ADG); CC BY-NC 4.0 (FIC, WN)",
    citation="Paccosi T., Palmero Aprosio A. (2022). KIND: an Italian Multi-Domain Dataset for Named Entity "
             "Recognition. LREC 2022.",
    homepage="https://github.com/dhfbk/KIND",
    obtain_hint="Copy evalita-2023/*.tsv of https://github.com/dhfbk/KIND into raw/ner/.",
    converter="ner:convert",
    schema="ner",
    configs=DOMAINS,
    paper_splits={
        "adg/train": 5147, "adg/dev": 1122, "adg/trial": 5, "adg/test": 521,
        "fic/train": 11423, "fic/dev": 1051, "fic/trial": 5, "fic/test": 1517,
        "wn/train": 10912, "wn/dev": 2594, "wn/trial": 5, "wn/test": 2088,
    },
    id_field=None,
    output_type="generate_until",
    target="{% for e in entities %}{{ e.entity_text }}${{ e.type }}{% if not loop.last %},{% endif %}"
           "{% else %}&&NOENT&&{% endfor %}",
    # lm-eval's YAML writes this prompt over three lines of a double-quoted scalar, which
    # YAML folds into spaces: the published numbers were obtained with spaces, not newlines.
    prompts=two_gen_prompts(
        "Devi svolgere un compito di riconoscimento delle entità nei testi. ",
        "Estrai tutte le entità di tipo PER (persona), LOC (luogo) e ORG (organizzazione) dal testo seguente. Riporta "
        "ogni entità con il formato: Entità$Tipo, separando ciascuna coppia con ','. Se non ci sono entità da "
        "estrarre, rispondi con '&&NOENT&&'. Testo: '{{text}}' Entità:",
    ),
    metrics=[NER_F1, NER_F1_STRICT],
    gold_field="entities",
    order=7,
    eval_split="test",
    fewshot_split="trial",
    stop=["</s>", "\n"],
    record_check=check_record,
    # lm-eval sets no max_gen_toks for these tasks: its default, 256, applies.
    max_new_tokens=256,
    task_categories=["token-classification", "text-generation"],
    output_pattern=OUTPUT_PATTERN,
    output_closings=("x$PER", "x$LOC", "x$ORG"),
    output_empty=NO_ENT,
    hub_splits=HubSplits("entity_recognition", test="reduced_test", fewshot="trial"),
)
