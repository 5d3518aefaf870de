"""Issue 28: replies written by hand, each with the reading a person gives it, against both answer rules.

A rule may leave unparsed a reply a person reads (those few are listed in docs/settings.md);
it may never credit an option a person would not read from the reply (a wrong credit).
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalita_eval.settings.answers import UNPARSED_REASONS, match_option_rule, parse_letter_rule

from paths import ROOT, TEST_DATA

SA = ["Positivo", "Negativo", "Neutro", "Misto"]
WIC = ["No", "Sì"]
FAQ = ["Il POD è il codice che identifica il punto di prelievo", "Il POD è riportato in bolletta",
       "Si può chiedere al servizio clienti", "Non è necessario"]
BOTH = ["Invii la ricevuta di entrambi i versamenti", "Non serve alcun versamento"]  # an option holding "entrambi"
DOCS = ROOT / "docs" / "settings.md"

# (reply, option texts, the option a person reads (None: none), what the rule returns: (index, rule) or (None, reason))
CE = [
    ("B", SA, 1, (1, "letter")), ("b.", SA, 1, (1, "letter")), ("(C)", SA, 2, (2, "letter")),
    ("Risposta: D", SA, 3, (3, "in_text")), ("La risposta corretta è B.", SA, 1, (1, "in_text")),
    ("B: Negativo", SA, 1, (1, "label")), ("B) Negativo", SA, 1, (1, "label")), ("B: Neg", SA, 1, (1, "label")),  # cut
    ("B: Negativo, il tweet critica il governo", SA, 1, (1, "label")), ('D: "Misto"', SA, 3, (3, "label")),
    ("C: Neutro.", SA, 2, (2, "label")), ("A: Positivo", SA, 0, (0, "label")),
    ("B: Positivo", SA, None, (None, "label_contradicts_text")),
    ("B: il tweet è negativo", SA, 1, (None, "label_contradicts_text")),  # read by a person, unparsed (docs)
    ("Positivo\nB: Negativo\nC: Neutro\nD", SA, None, (None, "echo")),  # an echo cut by the budget (issue 28: was D)
    ("Positivo\nB: Negativo\nC: Neutro\nD: Misto", SA, None, (None, "echo")),
    ("A: Positivo\nB: Negativo", SA, None, (None, "echo")), ("Positivo\nB: Neg", SA, None, (None, "echo")),
    ("Positivo\nB", SA, None, (None, "echo")), ("Positivo\nNegativo", SA, None, (None, "echo")),
    ("B: Negativo\nC: Neutro", SA, None, (None, "echo")), ("A\nB", SA, None, (None, "echo")),
    ("A e B", SA, None, (None, "several")), ("B o C", SA, None, (None, "several")),
    ("Entrambe (A e B)", SA, None, (None, "several")), ("Non è né A né B", SA, None, (None, "several")),
    ("Direi B ma potrebbe essere anche C", SA, None, (None, "several")), ("La risposta è B oppure C", SA, None, (None, "several")),
    ("Risposta: B\nA: Positivo", SA, None, (None, "echo")), ("Risposta:\nB: Negativo", SA, 1, (1, "label")),
    ("Cosa è il deposito cauzionale?\nA:", FAQ, None, (None, "echo")),  # the question restated, the list begun (real)
    ("Il tweet critica il governo\nB: Negativo", SA, 1, (None, "echo")),  # read by a person, unparsed (docs) ("Positivo, quindi B", SA, None, (None, "several")),
    ("Risposta: B (Positivo)", SA, None, (None, "several")),
    ("La risposta corretta non è A, è B", SA, 1, (1, "in_text")), ("B, non A", SA, 1, (1, "in_text")),
    ("Né A né B, ma C", SA, 2, (2, "in_text")), ("Non è A", SA, None, (None, "negated")),
    ("B, non negativo", SA, None, (None, "negated")),
    ("La B è sbagliata", SA, None, (None, "negated")), ("B è sbagliata, C", SA, 2, (2, "in_text")),
    ("Positivo", SA, 0, (None, "no_option")), ("Il tweet è negativo", SA, 1, (None, "no_option")),  # CE asks for the letter
    ("Non lo so", SA, None, (None, "no_option")), ("", SA, None, (None, "no_option")),
    ("Nessuna delle opzioni", SA, None, (None, "no_option")),
    ("A questa domanda rispondo C", SA, 2, (2, "in_text")), ("E' la D", SA, 3, (3, "in_text")),
    ("D'accordo, la risposta è C", SA, 2, (2, "in_text")), ("I sentimenti sono contrastanti: D", SA, 3, (3, "in_text")),
    ("Sicuramente B", SA, 1, (1, "in_text")), ("Risposta: B (Negativo)", SA, 1, (1, "in_text")),
    ("Negativo, quindi B", SA, 1, (1, "in_text")), ("B\nPerché il tweet critica il governo", SA, 1, (1, "label")),
    ("B: Negativo\nRispondi solo con la lettera della risposta corretta.", SA, 1, (1, "label")),
    ("B: Sì", WIC, 1, (1, "label")), ('B: "No"', WIC, None, (None, "label_contradicts_text")),
    ("No\nB: Sì\nRispondi solo con la lettera", WIC, None, (None, "echo")), ("A: No\nB: Sì", WIC, None, (None, "echo")),
    ("Sì", WIC, 1, (None, "no_option")), ("B, hanno lo stesso significato", WIC, 1, (1, "in_text")),
    ("A. Le due parole hanno significati diversi.", WIC, 0, (None, "label_contradicts_text")),
    ("Risposta corretta: A", WIC, 0, (0, "in_text")), ("A, no", WIC, 0, (0, "in_text")),
    ("A: Il POD è il codice che identifica", FAQ, 0, (0, "label")),  # cut by the budget
    ("A: Il POD e il 1234564", FAQ, None, (None, "label_contradicts_text")),  # issue 28: was A
    ("A: Il contratto è stato stato stato.", FAQ, None, (None, "label_contradicts_text")),  # issue 28: was A
    ("A: Il POD è riportato in bolletta", FAQ, None, (None, "label_contradicts_text")),
    ("\nA: Il POD è il codice che identifica il punto di prelievo", FAQ, 0, (0, "label")),
    ("A: Il POD è il codice che identifica il punto di prelievo\nB: Il POD è riportato", FAQ, None, (None, "echo")),
    ("C", FAQ, 2, (2, "letter")),
    ("A: Invii la ricevuta di entrambi i versamenti", BOTH, 0, (0, "label")),  # the option's own "entrambi"
    ("Risposta: A (Invii la ricevuta di entrambi i versamenti)", BOTH, 0, (0, "in_text")),
    ("Entrambe, A e B", BOTH, None, (None, "several")),
]
TEXT = [
    ("Negativo", SA, 1, (1, "exact")), ("negativo.", SA, 1, (1, "exact")), ("Misto", SA, 3, (3, "exact")),
    ("Risposta: Neutro", SA, 2, (2, "exact")), ("Neutro, il tweet riporta una notizia", SA, 2, (2, "exact")),
    ("Neutro il tweet riporta una notizia", SA, 2, (2, "start")),
    ("Il sentimento è negativo", SA, 1, (1, "in_text")), ("Direi misto", SA, 3, (3, "in_text")),
    ("Il tweet esprime un sentimento negativo, non positivo", SA, 1, (1, "in_text")),
    ("Il sentiment non è positivo", SA, None, (None, "negated")),  # issue 28: was Positivo
    ("Non è negativo, è positivo", SA, 0, (0, "in_text")),  # issue 28: was Negativo
    ("Positivo è sbagliato, è negativo", SA, 1, (1, "in_text")),
    ("Non positivo, ma neanche negativo: neutro", SA, 2, (2, "in_text")),
    ("Positivo o negativo", SA, None, (None, "several")), ("Positivo e negativo", SA, None, (None, "several")),
    ("Neutro o Misto", SA, None, (None, "several")), ("Entrambi, positivo e negativo", SA, None, (None, "several")),
    ("Né positivo né negativo", SA, 2, (None, "several")),  # a person infers Neutro; unparsed (docs)
    ("Positivo. Il tono è neutro", SA, 0, (None, "several")),  # a person may read Positivo; unparsed (docs)
    ("Positivo\nNegativo\nNeutro\nMisto", SA, None, (None, "echo")), ("Positivo\nNeg", SA, None, (None, "echo")),
    ("Positivo\nNegativo\nNeutro\nMi", SA, None, (None, "echo")), ("Opzioni:\nPositivo\nNegativo", SA, None, (None, "echo")),
    ("B: Negativo", SA, 1, (1, "exact")), ("A: Negativo", SA, None, (None, "label_contradicts_text")),
    ("Non saprei", SA, None, (None, "no_option")), ("Il tweet parla di politica", SA, None, (None, "no_option")),
    ("Negativo\nIl tweet critica il governo", SA, 1, (1, "exact")),
    ("Sì", WIC, 1, (1, "exact")), ("Si", WIC, 1, (1, "exact")), ("sì, hanno lo stesso significato", WIC, 1, (1, "exact")),
    ("No, non hanno lo stesso significato", WIC, 0, (0, "exact")), ("No, non credo", WIC, 0, (0, "exact")),
    ("Non si può dire", WIC, None, (None, "no_option")), ("Direi di sì", WIC, 1, (1, "in_text")),
    ("Direi di si", WIC, 1, (None, "no_option")),  # the accent-free si inside a sentence: the pronoun too (docs)
    ("Sì e no", WIC, None, (None, "several")), ("Sì o no", WIC, None, (None, "several")),
    ("No\nSì", WIC, None, (None, "echo")), ("No\nS", WIC, None, (None, "echo")), ("Non è sì", WIC, None, (None, "negated")),
    ("Sì\nRispondi riportando solo il testo della risposta corretta.", WIC, 1, (1, "exact")),
    ("La risposta è no", WIC, 0, (0, "in_text")), ("Risposta: Si", WIC, 1, (1, "exact")),
    ("Direi di sì, non no", WIC, 1, (1, "in_text")), ("Entrambe", WIC, None, (None, "several")),
    ("Il POD è riportato in bolletta", FAQ, 1, (1, "exact")),
    ("Il POD è riportato in bolletta, nella prima pagina", FAQ, 1, (1, "exact")),
    ("Il POD è il codice che identifica il punto di prelievo\nIl POD è riportato in bolletta", FAQ, None, (None, "echo")),
    ("Il POD è il codice", FAQ, 0, (None, "no_option")),  # an option's start alone (docs)
    ("Non è necessario", FAQ, 3, (3, "exact")),  # the option's own "non" is no negation
    ("Invii la ricevuta di entrambi i versamenti", BOTH, 0, (0, "exact")),  # the option's own "entrambi"
    ("Direi: invii la ricevuta di entrambi i versamenti", BOTH, 0, (0, "exact")),
    ("Entrambe le risposte", BOTH, None, (None, "several")),
    # five options (AT): an option that looks like option E's line is still itself
    ("E. coli", ["Stafilococco", "E. coli", "Streptococco", "Candida", "Virus"], 1, (1, "exact")),
    ("E. coli\nB: E. coli", ["Stafilococco", "E. coli", "Streptococco", "Candida", "Virus"], None, (None, "echo")),
]


def test_corpus_size() -> None:
    assert len(CE) + len(TEXT) >= 60 and len(CE) >= 30 and len(TEXT) >= 30


@pytest.mark.parametrize(("reply", "texts", "person", "expected"), CE)
def test_letter_rule_reads_as_a_person(reply: str, texts: list[str], person: int | None, expected: tuple) -> None:
    got = parse_letter_rule(reply, "ABCD"[: len(texts)], texts)
    assert got == expected
    assert got[0] is None or got[0] == person  # never a wrong credit
    assert got[0] is not None or got[1] in UNPARSED_REASONS


@pytest.mark.parametrize(("reply", "options", "person", "expected"), TEXT)
def test_option_rule_reads_as_a_person(reply: str, options: list[str], person: int | None, expected: tuple) -> None:
    got = match_option_rule(reply, options)
    assert got == expected
    assert got[0] is None or got[0] == person
    assert got[0] is not None or got[1] in UNPARSED_REASONS


def test_replies_a_person_reads_but_the_rules_leave_unparsed_are_documented() -> None:
    """Each such reply is in docs/settings.md, written as there (a line break as \\n)."""
    docs = DOCS.read_text("utf-8")
    missed = [reply for reply, _t, person, (index, _r) in CE + TEXT if person is not None and index is None]
    assert len(missed) == 10
    for reply in missed:
        assert "`" + reply.replace("\n", "\\n") + "`" in docs, reply


# -- property: a reply holding two or more option lines is never credited, wherever the budget cuts it ------------
POOL = SA + WIC + FAQ + ["Stafilococco", "E. coli", "non hanno lo stesso significato", "hanno lo stesso significato", "Forse"]
WORD = st.text(alphabet="abcdefghilmnopqrstuvzàèéìòù", min_size=1, max_size=8)
OPTIONS = st.one_of(
    st.lists(st.sampled_from(POOL), min_size=2, max_size=5, unique=True),
    st.lists(st.lists(WORD, min_size=1, max_size=4).map(" ".join).map(str.capitalize), min_size=2, max_size=5, unique=True),
)


@st.composite
def echoed_replies(draw) -> tuple[list[str], str, int]:
    """(options, a reply listing two or more option lines, the position where the second option line starts)."""
    options = draw(OPTIONS)
    letters = "ABCDE"[: len(options)]
    indices = draw(st.lists(st.integers(0, len(options) - 1), min_size=2, max_size=6))
    lines = []
    for i in indices:
        shown = options[draw(st.integers(0, len(options) - 1))] if draw(st.booleans()) else options[i]  # a label's text may be another's
        lines.append(draw(st.sampled_from([f"{letters[i]}: {shown}", f"{letters[i]}) {shown}", f"{letters[i]}. {shown}",
                                           f"({letters[i]}) {shown}", options[i]])))
    before = draw(st.sampled_from(["", "Risposta:", "B", "La risposta è A", "Sì", "Positivo", "Opzioni:"]))
    after = draw(st.sampled_from(["", "Rispondi solo con la lettera della risposta corretta.", "Risposta: B", "A"]))
    head = (before + "\n") if before else ""
    reply = head + "\n".join(lines) + ("\n" + after if after else "")
    return options, reply, len(head) + len(lines[0]) + 1


@settings(max_examples=400, deadline=None, derandomize=True)
@given(echoed_replies(), st.data())
def test_no_reply_with_two_option_lines_is_credited_whatever_the_cut(case, data) -> None:
    options, reply, second = case
    cut = data.draw(st.integers(second + 1, len(reply)), label="cut")
    letters = "ABCDE"[: len(options)]
    for text in (reply, reply[:cut]):
        assert parse_letter_rule(text, letters, options) == (None, "echo"), text
        assert match_option_rule(text, options) == (None, "echo"), text


# -- real replies of SmolLM2-135M-Instruct, issue 28 (tests/data/answers/README.md) --------------------------------
def _issue28_records() -> list[dict]:
    path = TEST_DATA / "answers" / "smollm2-135m-instruct-issue28.jsonl"
    return [json.loads(x) for x in path.read_text("utf-8").splitlines()]


def test_real_replies_issue28_read_as_a_person() -> None:
    from evalita_eval.settings.instruct import parse_answer_rule

    records = _issue28_records()
    assert len(records) == 116
    assert {(r["setting"], r["chat_template"]) for r in records} == {("ce", False), ("ce", True), ("ce-ni", False), ("ce-ni", True)}
    for r in records:
        got = parse_answer_rule(r["setting"], r["generation"], r["choices"], r["option_texts"])
        assert list(got) == r["rules"], r
        assert got[0] is None or got[0] == r["expected"], r  # never a wrong credit
    assert [r["generation"] for r in records if r["rules"][0] is not None] == ["D: Misto"]
    # read by a person, left unparsed by the rules (docs/settings.md): FAQ option texts with words changed
    missed = [r for r in records if r["expected"] is not None and r["rules"][0] is None]
    assert [(r["task"], r["setting"], r["expected"], r["rules"][1]) for r in missed] == [("faq", "ce-ni", 3, "no_option"),
                                                                                         ("faq", "ce-ni", 2, "no_option"),
                                                                                         ("faq", "ce-ni", 3, "no_option")]
    docs = DOCS.read_text("utf-8")
    assert "`Il deposito cauzionale e una somma di denaro che l'utente versa al gestore" in docs
    assert "`Il numero per comunicare la lettura del contratto 84.00.00.343.`" in docs
    # what the rules before issue 28 credited that a person does not: the cut SA echo, FAQ's "A: " + other text, ...
    wrong_before = [r["generation"] for r in records if r["read_before_issue_28"] not in (None, r["expected"])]
    assert len(wrong_before) == 17
    assert "Positivo\nB: Negativo\nC: Neutro\nD" in wrong_before and "\nA: Il POD e il 1234564" in wrong_before
