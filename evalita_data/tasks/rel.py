"""CLinkaRT (Evalita 2023): RML->EVENT relations in clinical sentences of E3C."""

from ..scoring.metrics import REL_F1, REL_F1_STRICT
from ..scoring.parsers import NO_REL, PAIR_PIECE

from ..taskspec import HubSplits, TaskSpec, two_gen_prompts

MENTIONS = ("RML", "EVENT")
_PAIR = rf"{PAIR_PIECE}\${PAIR_PIECE}"
# The answer format the prompt asks for: misura$esame%misura$esame, or &&NOREL&&.
OUTPUT_PATTERN = rf"{NO_REL}|{_PAIR}(%{_PAIR})*"


def check_record(rec: dict) -> list[str]:
    """Both mentions of every relation occur in the sentence text."""
    return [
        f"relations.{i}.{j}: {what} {mention!r} does not occur in text"
        for i, pair in enumerate(rec["relations"])
        for j, (what, mention) in enumerate(zip(MENTIONS, pair))
        if mention not in rec["text"]
    ]

TASK = TaskSpec(
    id="rel",
    title="Relation Extraction (CLinkaRT on E3C)",
    source="CLinkaRT, Evalita 2023, training release v1.1 on the E3C corpus (public copy: "
           "https://github.com/JPardo08/PAQUITA, commit ff30cfc1)",
    license="CC BY-NC 4.0",
    citation="Altuna B., Karunakaran G., Lavelli A., Magnini B., Speranza M., Zanoli R. (2023). CLinkaRT at EVALITA "
             "2023: Overview of the Task on Linking a Lab Result to its Test Event in the Clinical Domain. EVALITA "
             "2023.",
    homepage="https://e3c.fbk.eu/clinkart",
    obtain_hint="The CLinkaRT test set is not public: ask the organisers (https://e3c.fbk.eu/clinkart) and put "
                "test.txt and test_tokenized/ in raw/rel/.",
    converter="rel:convert",
    schema="rel",
    paper_splits={"train": 1113, "trial": 5, "test": 1064},
    id_field=None,
    output_type="generate_until",
    target="{% for r in relations %}{{ r[0] }}${{ r[1] }}{% if not loop.last %}%{% endif %}"
           "{% else %}&&NOREL&&{% endfor %}",
    # lm-eval's YAML writes this prompt over three lines of a double-quoted scalar, which
    # YAML folds into spaces: the published numbers were obtained with spaces, not newlines.
    prompts=two_gen_prompts(
        "Devi svolgere un compito di estrazione di relazioni da documenti medici. ",
        "Dato un documento medico devi estrarre tutte le misurazioni degli esami medici presenti. Riporta ogni "
        "relazione nel formato: misurazione$esame, separando ciascuna coppia con '%'. Se non ci sono relazioni da "
        "estrarre, rispondi con '&&NOREL&&'. Testo: '{{text}}' Relazioni:",
    ),
    metrics=[REL_F1, REL_F1_STRICT],
    gold_field="relations",
    order=8,
    eval_split="test",
    fewshot_split="trial",
    stop=["</s>"],
    record_check=check_record,
    # lm-eval sets no max_gen_toks for these tasks: its default, 256, applies.
    max_new_tokens=256,
    task_categories=["text-generation"],
    output_pattern=OUTPUT_PATTERN,
    output_closings=("x$x",),
    output_empty=NO_REL,
    hub_splits=HubSplits("relation_extraction", fewshot_not_ours=(
        "the official dev split is not in the CLinkaRT release we convert (our few-shot split is its 5-record trial)")),
)
