"""Lexical substitution, Evalita 2009 (SemEval-2007 style XML + gold file)."""

import re

from ..scoring.metrics import LS_F1
from ..scoring.parsers import NO_SYN

from ..taskspec import HubSplits, TaskSpec, two_gen_prompts

_HEAD = re.compile(r"<head>(.*?)</head>", re.S)
_WORD = r"[^,\n]+"
# The answer format the prompt asks for: lemma, lemma, ... on one line, or &&NOSYN&&.
OUTPUT_PATTERN = rf"{NO_SYN}|{_WORD}(, ?{_WORD})*"


def check_record(rec: dict) -> list[str]:
    """One <head>..</head> in context around ``head``; answers unique, positive, sorted."""
    problems = []
    marked = _HEAD.findall(rec["context"])
    if len(marked) != 1 or rec["context"].count("<head>") != 1 or rec["context"].count("</head>") != 1:
        problems.append(f"context: {len(marked)} <head>..</head> spans; expected exactly one")
    elif marked[0] != rec["head"]:
        problems.append(f"head: {rec['head']!r} differs from the marked word {marked[0]!r} in context")
    if rec["lexelt"].rsplit(".", 1)[0] != rec["lexelt_lemma"]:
        problems.append(f"lexelt_lemma: {rec['lexelt_lemma']!r} is not the lemma of lexelt {rec['lexelt']!r}")
    words = [a["word"] for a in rec["answers"]]
    if len(set(words)) != len(words):
        problems.append("answers: a word is listed twice")
    if rec["answers"] != sorted(rec["answers"], key=lambda a: (-a["count"], a["word"])):
        problems.append("answers: not sorted by count (descending), then word")
    return problems


TASK = TaskSpec(
    id="ls",
    title="Lexical Substitution (Evalita 2009)",
    source="Evalita 2009 Lexical Substitution task (ISST sentences), SemEval-2007 style XML and gold files",
    license="CC BY-NC-SA 4.0 (as published by evalitahf/lexical_substitution)",
    citation="Toral A. (2009). The Lexical Substitution Task at EVALITA 2009. EVALITA 2009.",
    homepage="http://www.evalita.it/2009/tasks/lexical",
    obtain_hint="No public copy was found in code repositories: download the Evalita 2009 lexical substitution data "
                "from https://live.european-language-grid.eu/catalogue/corpus/8421 and put trial/ and test/ in "
                "raw/ls/.",
    converter="ls:convert",
    schema="ls",
    paper_splits={"dev": 272, "test": 1710},
    id_field="id",
    output_type="generate_until",
    # lm-eval ls_doc_to_target: the gold words joined by ", ", or &&NOSYN&& when there are none.
    target="{% if answers %}{{ answers | map(attribute='word') | join(', ') }}{% else %}&&NOSYN&&{% endif %}",
    prompts=two_gen_prompts(
        "Devi risolvere un compito di sostituzione lessicale. ",
        "Trova 10 parole che possono sostituire la parola racchiusa tra i marcatori <head> nella seguente frase: "
        "'{{context}}', mantenendo lo stesso significato. Elenca i lemmi (forme base) di queste parole, separandoli "
        "con una virgola, ad esempio: lemma1, lemma2, lemma3, lemma4, lemma5. Non aggiungere commenti o altro testo. "
        "Risposta:",
    ),
    metrics=[LS_F1],
    gold_field="answers",
    order=6,
    eval_split="test",
    fewshot_split="dev",
    record_check=check_record,
    stop=["</s>"],
    # lm-eval sets no max_gen_toks for these tasks: its default, 256, applies.
    max_new_tokens=256,
    task_categories=["text-generation"],
    output_pattern=OUTPUT_PATTERN,
    output_closings=("x",),
    output_empty=NO_SYN,
    hub_splits=HubSplits("lexical_substitution"),
)
