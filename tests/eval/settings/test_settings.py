"""Instruct settings (CE, CE-NI, OE), answer matching, constrained decoding, system instruction, multi-turn few-shot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from evalita_data.registry import TASKS
from evalita_eval.settings.answers import match_option_rule, normalize, parse_letter_rule
from evalita_eval.api import GenRequest
from evalita_eval.running.cache import request_key
from evalita_eval.settings.fewshot import build_contexts
from evalita_eval.api import request_payload
from evalita_eval.sources.entries import all_entries

from paths import ROOT, TEST_DATA


def parse_letter(answer: str, letters, option_texts=None) -> int | None:
    return parse_letter_rule(answer, letters, option_texts)[0]


def match_option(answer: str, options) -> int | None:
    return match_option_rule(answer, options)[0]


def accepts(cache, constraint, text: str, tokenizer) -> bool:
    """Whether ``text`` (tokenized as the model would write it) is a complete answer ``constraint`` allows."""
    matcher = cache._xgr.GrammarMatcher(cache.compiled(constraint))
    for token in tokenizer.encode(text, add_special_tokens=False):
        if not matcher.accept_token(token):
            return False
    return matcher.is_completed() if hasattr(matcher, "is_completed") else matcher.accept_token(tokenizer.eos_token_id)

DATA = TEST_DATA / "build"
MC_TASKS = [t for t, s in TASKS.items() if s.output_type == "multiple_choice"]
SETTINGS = ["ce", "ce-ni", "oe"]


def _records(task: str, config: str | None, split: str) -> list[dict]:
    path = DATA / task / (config or "") / f"{split}.jsonl"
    return [json.loads(x) for x in path.read_text("utf-8").splitlines()]


# -- answer matching (hand-computed) ------------------------------------------------------
def test_normalize_folds_accents_case_punctuation_whitespace() -> None:
    assert normalize("  Sì,  È VERO!\n") == "si e vero"
    assert normalize("all'odio") == "all odio"
    assert normalize("Perché?!") == "perche"


@pytest.mark.parametrize(("answer", "expected"), [
    ("B", 1), (" b ", 1), ("(C).", 2), ("Risposta: B", 1), ("B) Sì", 1), ("La risposta è C, credo", 2),
    ("a", 0),  # alone, any case
    ("la risposta e a", None),  # lowercase letters inside a sentence are Italian words
    ("F", None), ("", None), ("Nessuna", None),
])
def test_parse_letter(answer: str, expected: int | None) -> None:
    assert parse_letter(answer, ["A", "B", "C", "D"]) == expected


@pytest.mark.parametrize(("answer", "expected"), [
    ("Si", 1), ("SÌ.", 1), ("no!", 0), ("  No  ", 0),  # accents, case, punctuation, whitespace
    ("No, non credo", 0),  # "non" is not the word "no"
    ("Direi di sì, non no", 1),  # the earliest option wins
    ("Nosì", None), ("forse", None), ("", None),
])
def test_match_option_yes_no(answer: str, expected: int | None) -> None:
    assert match_option(answer, ["No", "Sì"]) == expected


def test_match_option_answer_containing_another_option() -> None:
    options = ["non hanno lo stesso significato", "hanno lo stesso significato"]
    assert match_option("Non hanno lo stesso significato.", options) == 0  # exact, after normalisation
    assert match_option("Le due parole non hanno lo stesso significato", options) == 0  # inner match dropped
    assert match_option("Hanno lo stesso significato", options) == 1
    # two options given as alternatives name no one option (issue 28: "Neutro o Misto" was read as Neutro)
    assert match_option_rule("Neutro o Misto", ["Positivo", "Negativo", "Neutro", "Misto"]) == (None, "several")
    assert match_option("direi misto", ["Positivo", "Negativo", "Neutro", "Misto"]) == 3
    # same start: the longest option
    assert match_option("acqua calda sanitaria", ["acqua", "acqua calda"]) == 1


# Answers of SmolLM2-135M-Instruct on the public tasks (issue 23), with the option a reader
# would take from them. WiC CE: A = "No", B = "Sì" as in the transcript.
REAL_CE = [
    ("No\nB: Sì\nRispondi solo con la lettera", ["No", "Sì"], None),  # a text, then an echoed option line
    ('B: "No"', ["No", "Sì"], None),  # B's label with A's text: contradictory
    ('B: "Sì"', ["No", "Sì"], 1), ("B: Sì", ["No", "Sì"], 1), ("B)", ["No", "Sì"], 1),
    ("A: No\nB: Sì\nRispondi solo con la lettera della risposta corretta.", ["No", "Sì"], None),  # the option list echoed
    ("Risposta: B\nA: No\nB: Sì", ["No", "Sì"], None),  # two option lines: an echo (issue 28; was read as B)
    ("A questa domanda rispondo B", ["No", "Sì"], 1),  # "A" opening the sentence is the preposition
    ("E' la B", ["No", "Sì"], 1), ("C'è una sola risposta: B", ["No", "Sì", "Forse"], 1),  # elided words are not letters
]
REAL_TEXT = [
    # issue 28: A's text and B's option line are two option lines, an echo (was read as No)
    ("No\nB: Sì\nRispondi solo con la lettera", ["No", "Sì"], None, "echo"),
    ('B: "No"', ["No", "Sì"], None, "label_contradicts_text"),  # B's label, A's text (issue 28; was read as No)
    ("Non si può dire", ["No", "Sì"], None, "no_option"),  # the pronoun si is not the answer Sì
    ("Si tratta di due significati diversi", ["No", "Sì"], None, "no_option"),
    ("Si, hanno lo stesso significato", ["No", "Sì"], 1, "exact"),
    ("Sì\nNo", ["Sì", "No"], None, "echo"),  # the option list echoed (CE-NI shows the options one per line)
    ("No\nSì\nRispondi riportando solo il testo della risposta corretta.", ["No", "Sì"], None, "echo"),
    ("Sì\nB: No", ["No", "Sì"], None, "echo"),  # B's text and an option line: two option lines (issue 28; was Sì)
    ("Sì, le due parole hanno lo stesso significato.", ["No", "Sì"], 1, "exact"),
    ("No, le parole non hanno lo stesso significato", ["No", "Sì"], 0, "exact"),
    ("Negativo. Il tweet critica il governo", ["Positivo", "Negativo", "Neutro", "Misto"], 1, "exact"),
    ("Neutro o Misto", ["Positivo", "Negativo", "Neutro", "Misto"], None, "several"),  # alternatives (issue 28; was Neutro)
    ("Neutro, direi", ["Positivo", "Negativo", "Neutro", "Misto"], 2, "exact"), ("Neutro direi", ["Positivo", "Negativo", "Neutro", "Misto"], 2, "start"),
    ("Il sentimento è negativo", ["Positivo", "Negativo", "Neutro", "Misto"], 1, "in_text"),
    ("Opzioni:\nA: Positivo\nB: Negativo", ["Positivo", "Negativo", "Neutro", "Misto"], None, "echo"),
    ("Direi di si", ["No", "Sì"], None, "no_option"),
    ("Risposta: Si", ["No", "Sì"], 1, "exact"), ("Risposta: Negativo", ["Positivo", "Negativo"], 1, "exact"),
]


@pytest.mark.parametrize(("answer", "texts", "expected"), REAL_CE)
def test_parse_letter_reads_the_answer_not_the_echo(answer: str, texts: list[str], expected: int | None) -> None:
    assert parse_letter(answer, "ABCDE"[: len(texts)], texts) == expected


@pytest.mark.parametrize(("answer", "options", "expected", "rule"), REAL_TEXT)
def test_match_option_reads_the_answer_not_the_echo(answer: str, options: list[str], expected: int | None, rule: str | None) -> None:
    assert match_option_rule(answer, options) == (expected, rule)


def test_real_model_answers() -> None:
    """Answers of SmolLM2-135M-Instruct (tests/data/answers/README.md), each with the option a reader takes from it."""
    from evalita_eval.settings.instruct import parse_answer_rule

    records = [json.loads(x) for x in (DATA.parent / "answers" / "smollm2-135m-instruct.jsonl").read_text("utf-8").splitlines()]
    assert len(records) == 94
    for r in records:
        got = parse_answer_rule(r["setting"], r["generation"], r["choices"], r["option_texts"])
        assert got == (r["expected"], r["rule"] if r["expected"] is not None else r["reason"]), r
    # No echoed option list is credited: every answer holding an option line, or the CE-NI list, is unparsed
    # unless the option line is the whole answer.
    echoes = [r for r in records if "\n" in r["generation"].strip() and ("B: " in r["generation"] or r["generation"].startswith(("No\nSì", "Positivo\nNegativo")))]
    assert len(echoes) >= 6 and all(r["expected"] is None for r in echoes)
    credited = [r["generation"] for r in records if r["expected"] is not None]
    assert credited == ["D: Misto", 'Il testo della risposta corretta è "Positivo" e il testo della rispost']
    # the pronoun si inside an OE answer is not the answer Sì (the rules before issue 23 read both as Sì)
    pronoun = [r for r in records if r["setting"] == "oe" and " si " in f" {r['generation']} "]
    assert len(pronoun) == 2 and all(r["expected"] is None for r in pronoun)


def test_every_gold_answer_parses_to_itself() -> None:
    """In every setting, the gold answer written as a correct model would write it is read back as the gold option."""
    from evalita_eval.settings.instruct import parse_answer_rule, setting_task

    checked = 0
    for task_id in MC_TASKS:
        spec = TASKS[task_id]
        for split in {spec.eval_split, spec.fewshot_split}:
            for doc in _records(task_id, None, split):
                texts = setting_task(task_id, "oe").choices("p1", doc)
                for setting in SETTINGS:
                    task = setting_task(task_id, setting)
                    choices, gold = task.choices("p1", doc), task.target(doc)
                    assert parse_answer_rule(setting, choices[gold], choices, texts)[0] == gold, (task_id, setting, choices[gold])
                    checked += 1
    assert checked > 50
    # an option that looks like an option line is still itself
    assert match_option("E. coli", ["Stafilococco", "E. coli", "Streptococco"]) == 1


def test_rule_counts_per_prompt() -> None:
    from evalita_eval.settings.instruct import parse_answer_rule, reading_fields, rule_counts

    gens = ["B", "B: Sì", "Risposta: A", "No\nB: Sì", 'B: "No"', "Sì\nNo", "forse"]
    samples = [reading_fields(*parse_answer_rule("ce", g, ["A", "B"], ["No", "Sì"])) for g in gens]
    # issue 28: the unparsed answers are counted by reason; the counts still sum to n
    assert rule_counts(samples) == {"in_text": 1, "label": 1, "letter": 1, "unparsed: echo": 2,
                                    "unparsed: label_contradicts_text": 1, "unparsed: no_option": 1}
    assert [s["parsed_by"] for s in samples[:3]] == ["letter", "label", "in_text"] and samples[3]["parsed_by"] is None
    assert samples[3]["unparsed_reason"] == "echo" and samples[0]["unparsed_reason"] is None
    # samples written before issue 28 (no reason) still count as plain unparsed
    assert rule_counts([{"parsed_by": None}, {"parsed_by": "letter"}]) == {"letter": 1, "unparsed": 1}


# -- settings' prompts --------------------------------------------------------------------
def test_setting_prompts_render_as_declared() -> None:
    from evalita_eval.settings.instruct import setting_task

    doc = _records("te", None, "test")[0]
    q = f"La frase: '{doc['text1']}' implica logicamente che la frase: '{doc['text2']}' sia vera?"
    ce = setting_task("te", "ce")
    assert ce.render("p1", doc) == q + "\nA: Sì\nB: No\nRispondi solo con la lettera della risposta corretta.\nRisposta:"
    assert ce.choices("p1", doc) == ["A", "B"]
    assert ce.render("p2", doc) == "Devi risolvere un compito di inferenza semantica. " + ce.render("p1", doc)
    ceni = setting_task("te", "ce-ni")
    assert ceni.render("p1", doc) == q + "\nOpzioni:\nSì\nNo\nRispondi riportando solo il testo della risposta corretta.\nRisposta:"
    oe = setting_task("te", "oe")
    assert oe.render("p1", doc) == q + "\nRispondi con una sola parola.\nRisposta:"
    gold = ce.target(doc)
    assert ce.fewshot_answer("p1", doc) == "AB"[gold] and oe.fewshot_answer("p1", doc) == ["Sì", "No"][gold]
    at = _records("at", None, "test")[0]
    assert setting_task("at", "ce").choices("p1", at) == ["A", "B", "C", "D", "E"]
    assert setting_task("at", "oe").choices("p1", at) == [at[x] for x in "ABCDE"]


def test_unparseable_scored_wrong() -> None:
    from evalita_eval.settings.instruct import scored_prediction

    assert scored_prediction(None, 1, 2) == 0
    assert scored_prediction(None, 2, 4, TASKS["sa"].instruct.unparsed_as) == 3  # neutral (0,0) -> mixed (1,1)
    assert scored_prediction(None, 0, 5) == -1
    assert scored_prediction(3, 0, 5) == 3


# -- constraints --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def grammars(tiny_model: Path):
    from transformers import AutoTokenizer

    from evalita_eval.backends.grammar import GrammarCache

    tok = AutoTokenizer.from_pretrained(tiny_model)
    return GrammarCache(tok, len(tok)), tok


def test_every_gold_answer_is_accepted_by_its_constraint(grammars) -> None:
    from evalita_eval.settings.constrained import choice_constraint, task_constraint
    from evalita_eval.settings.instruct import setting_task

    cache, tok = grammars
    checked = 0
    for entry in all_entries():
        spec = entry.spec
        for split in {spec.eval_split, spec.fewshot_split}:
            for doc in _records(entry.task_id, entry.config, split):
                if spec.output_type == "multiple_choice":
                    for setting in SETTINGS:
                        task = setting_task(entry.task_id, setting)
                        choices = task.choices("p1", doc)
                        assert accepts(cache, choice_constraint(choices), choices[task.target(doc)], tok), (entry.name, setting, doc)
                        checked += 1
                elif task_constraint(spec) is not None:
                    gold = entry.compiled.target(doc)
                    assert accepts(cache, task_constraint(spec), gold, tok), (entry.name, gold)
                    checked += 1
    assert checked > 100
    # Gold answers of the full KIND / CLinkaRT training data that hold the separators themselves.
    for task, gold in (("ner", "112, High Street$LOC,Islington N. London$LOC"), ("ner", "Caserma Sani$LOC,Via Principe Amedeo, 184$LOC"),
                       ("rel", "9,8 g/dl$Hb%31,9%$ematocrito%10,66 × 10³/μl$neutrofili"), ("rel", "3.2 mg%$Cr")):
        assert accepts(cache, task_constraint(TASKS[task]), gold, tok), gold
    assert not accepts(cache, task_constraint(TASKS["ner"]), "Verdi$XYZ", tok)
    assert not accepts(cache, choice_constraint(["Sì", "No"]), "Si", tok)


def test_cache_key_without_constraint_is_unchanged() -> None:
    req = GenRequest("ctx", ("\n",), 8)
    old = request_key("m", "generate_until", {"context": "ctx", "stop": ["\n"], "max_new_tokens": 8})
    assert request_key("m", "generate_until", json.loads(json.dumps(request_payload(req)))) == old


def test_ce_constrained_one_token_equals_loglikelihood(tiny_model: Path) -> None:
    """Greedy decoding of one token restricted to the letters picks argmax over the letters'
    logits; with one-token letters and no delimiter (chat mode) that is the argmax of the
    letters' log-likelihoods, log_softmax being monotone with one normaliser per position."""
    from evalita_eval.api import BackendOptions, LLRequest
    from evalita_eval.backends import create_backend
    from evalita_eval.settings.constrained import choice_constraint
    from evalita_eval.settings.instruct import setting_task

    backend = create_backend("hf", BackendOptions(str(tiny_model)))
    compared = 0
    for task_id in MC_TASKS:
        task = setting_task(task_id, "ce")
        for doc in _records(task_id, None, TASKS[task_id].eval_split):
            for prompt in ("p1", "p2"):
                letters = task.choices(prompt, doc)
                assert all(len(backend.tokenizer.encode(x, add_special_tokens=False)) == 1 for x in letters)
                ctx = backend.apply_chat_template([{"role": "user", "content": task.render(prompt, doc)}])
                lls = [r.logprob for r in backend.loglikelihood([LLRequest(ctx, x) for x in letters])]
                [gen] = backend.generate_until([GenRequest(ctx, ("\n\n",), 1, choice_constraint(letters))])
                assert gen == letters[max(range(len(lls)), key=lambda i: (lls[i], -i))]
                compared += 1
    assert compared == 2 * sum(len(_records(t, None, TASKS[t].eval_split)) for t in MC_TASKS)


# -- end to end ---------------------------------------------------------------------------
def _run(args: list[str]) -> None:
    from evalita_eval.cli import main

    result = CliRunner().invoke(main, ["run", *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("backend", ["hf"])
def test_constrained_answers_always_parse(tiny_model: Path, tmp_path: Path, backend: str) -> None:
    for setting in SETTINGS:
        out = tmp_path / setting
        _run(["--model", str(tiny_model), "--data", str(DATA), "--tasks", ",".join(MC_TASKS), "--limit", "2",
              "--setting", setting, "--constrained", "--backend", backend, "--output-dir", str(out)])
        doc = json.loads((out / "results.json").read_text("utf-8"))
        assert doc["config"]["setting"] == setting and doc["config"]["constrained"] is True
        for task in MC_TASKS:
            assert sorted(doc["results"][task]) == ["p1", "p2"]
            for prompt, scores in doc["results"][task].items():
                assert scores["unparsed"] == 0 and scores["n"] == 2
                samples = [json.loads(x) for x in (out / "samples" / f"{task}_{prompt}.jsonl").read_text("utf-8").splitlines()]
                assert all(s["parsed_answer"] == s["generation"] == s["choices"][s["parsed"]] for s in samples)
                assert scores["acc"] == sum(s["parsed"] == s["gold"] for s in samples) / 2
                if setting == "oe":
                    assert 0.0 <= scores["rougeL_answer"] <= 1.0


def test_unconstrained_failures_are_counted(tiny_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "free"
    _run(["--model", str(tiny_model), "--data", str(DATA), "--tasks", ",".join(MC_TASKS), "--limit", "2",
          "--setting", "ce-ni", "--max-new-tokens", "3", "--output-dir", str(out)])
    doc = json.loads((out / "results.json").read_text("utf-8"))
    total = 0
    for task in MC_TASKS:
        for prompt, scores in doc["results"][task].items():
            samples = [json.loads(x) for x in (out / "samples" / f"{task}_{prompt}.jsonl").read_text("utf-8").splitlines()]
            assert scores["unparsed"] == sum(s["parsed"] is None for s in samples)
            assert all(s["prediction"] != s["gold"] for s in samples if s["parsed"] is None)
            total += scores["unparsed"]
    assert total > 0  # a random model's 3 free tokens rarely spell an option


@pytest.mark.parametrize("max_new", [4, 16])
def test_constrained_generative_tasks_always_parse(tiny_model: Path, tmp_path: Path, max_new: int) -> None:
    """With --constrained, every NER/REL/LS generation is a complete answer of its format,
    even when the token limit is small (the budget rule closes it: docs/settings.md)."""
    import re

    out = tmp_path / "gen"
    _run(["--model", str(tiny_model), "--data", str(DATA), "--tasks", "ner_adg,rel,ls", "--limit", "3", "--constrained",
          "--max-new-tokens", str(max_new), "--output-dir", str(out)])
    checked = 0
    for task, tid in (("ner_adg", "ner"), ("rel", "rel"), ("ls", "ls")):
        files = sorted((out / "samples").glob(f"{task}_p*.jsonl"))
        assert files
        for path in files:
            for line in path.read_text("utf-8").splitlines():
                gen = json.loads(line)["generation"]
                assert re.fullmatch(TASKS[tid].output_pattern, gen), (path.name, gen)
                checked += 1
    assert checked > 0


def test_unconstrained_generative_format_failures_are_counted(tiny_model: Path, tmp_path: Path) -> None:
    """Without --constrained, NER/REL/LS answers outside their format count as unparsed per prompt."""
    import re

    out = tmp_path / "free"
    _run(["--model", str(tiny_model), "--data", str(DATA), "--tasks", "ner_adg,rel,ls,sum", "--limit", "2",
          "--max-new-tokens", "8", "--output-dir", str(out)])
    doc = json.loads((out / "results.json").read_text("utf-8"))
    total = 0
    for task, tid in (("ner_adg", "ner"), ("rel", "rel"), ("ls", "ls")):
        for prompt, scores in doc["results"][task].items():
            gens = [json.loads(x)["generation"] for x in (out / "samples" / f"{task}_{prompt}.jsonl").read_text("utf-8").splitlines()]
            assert scores["n"] == len(gens) == 2
            assert scores["unparsed"] == sum(re.fullmatch(TASKS[tid].output_pattern, g) is None for g in gens)
            total += scores["unparsed"]
    assert total > 0  # a random model's 8 free tokens rarely close an entity list
    assert all("unparsed" not in scores for scores in doc["results"]["sum"].values())  # free text: no format

    # The report shows the counts side by side with a constrained run (0 there), as for the MC settings.
    from evalita_eval.reporting.report import write_report

    _run(["--model", str(tiny_model), "--data", str(DATA), "--tasks", "ner_adg,rel,ls", "--limit", "2", "--constrained",
          "--max-new-tokens", "8", "--output-dir", str(tmp_path / "con")])
    write_report([out / "results.json", tmp_path / "con" / "results.json"], tmp_path / "rep", k=5)
    payload = json.loads((tmp_path / "rep" / "report.json").read_text("utf-8"))
    assert payload["settings"]["headers"] == ["model", "task", "loglikelihood", "loglikelihood constrained"]
    rows = {r[1]: r for r in payload["settings"]["rows"]}
    for task in ("ner_adg", "rel", "ls"):
        free = sum(p["unparsed"] for p in doc["results"][task].values())
        answers = sum(p["n"] for p in doc["results"][task].values())
        assert rows[task][2].endswith(f"(unparsed {free} / {answers})") and rows[task][3].endswith(f"(unparsed 0 / {answers})")
    assert "(unparsed" not in rows["sum"][2]


def test_system_instruction_and_multiturn_contexts() -> None:
    from evalita_data.registry import compiled

    task = compiled("te")
    pool = _records("te", None, "dev")
    docs = _records("te", None, "test")[:1]
    q, ex = task.render("p1", docs[0]), pool
    seen: list = []

    def chat(messages):
        seen.append(messages)
        return "CHAT"

    [plain] = build_contexts(task, "p1", docs, pool, 1, 1234, system_instruction="Sei un esperto.")
    [shot] = [e for e in ex if plain.startswith("Sei un esperto." + task.render("p1", e))]
    assert plain == "Sei un esperto." + task.render("p1", shot) + " " + task.fewshot_answer("p1", shot) + "\n\n" + q
    build_contexts(task, "p1", docs, pool, 1, 1234, chat, system_instruction="Sei un esperto.")
    assert seen[-1] == [
        {"role": "system", "content": "Sei un esperto."},
        {"role": "user", "content": task.render("p1", shot)}, {"role": "assistant", "content": task.fewshot_answer("p1", shot)},
        {"role": "user", "content": q},
    ]
    build_contexts(task, "p1", docs, pool, 1, 1234, chat, system_instruction="Sei un esperto.", multiturn=False)
    assert seen[-1] == [{"role": "system", "content": "Sei un esperto."}, {"role": "user", "content": plain.removeprefix("Sei un esperto.")}]


def test_multiturn_needs_chat_template(tiny_model: Path, tmp_path: Path) -> None:
    from evalita_eval.cli import main

    result = CliRunner().invoke(main, ["run", "--model", str(tiny_model), "--data", str(DATA), "--tasks", "te", "--limit", "1",
                                       "--fewshot-as-multiturn", "--output-dir", str(tmp_path)])
    assert result.exit_code != 0 and "--fewshot-as-multiturn needs --apply-chat-template" in result.output


def test_report_puts_settings_side_by_side(tiny_model: Path, tmp_path: Path) -> None:
    from evalita_eval.reporting.report import write_report

    runs = {"ll": [], "ce": ["--setting", "ce", "--constrained"], "oe": ["--setting", "oe", "--max-new-tokens", "2"]}
    for name, extra in runs.items():
        _run(["--model", str(tiny_model), "--data", str(DATA), "--tasks", "te", "--limit", "2", "--output-dir", str(tmp_path / name), *extra])
    write_report([tmp_path / n / "results.json" for n in runs], tmp_path / "rep", k=5)
    payload = json.loads((tmp_path / "rep" / "report.json").read_text("utf-8"))
    assert set(payload["tasks"]) == {"te [loglikelihood]", "te [ce constrained]", "te [oe]"}
    assert payload["settings"]["headers"] == ["model", "task", "loglikelihood", "ce constrained", "oe"]
    [row] = payload["settings"]["rows"]
    ce = json.loads((tmp_path / "ce" / "results.json").read_text("utf-8"))["results"]["te"]
    accs = sorted(100 * ce[p]["acc"] for p in ("p1", "p2"))
    shown = json.loads((tmp_path / "ce" / "results.json").read_text("utf-8"))["model"]["name"]  # <folder>-<weights hash>
    assert shown.startswith(f"{tiny_model.name}-") and row[:2] == [shown, "te"] and row[3].startswith(f"{sum(accs) / 2:.1f} [{accs[0]:.1f}–{accs[1]:.1f}]")
    assert row[3].endswith("(unparsed 0 / 4)") and "(unparsed " not in row[2]
    oe = json.loads((tmp_path / "oe" / "results.json").read_text("utf-8"))["results"]["te"]
    assert row[4].endswith(f"(unparsed {oe['p1']['unparsed'] + oe['p2']['unparsed']} / 4)")
    assert "## Settings side by side" in (tmp_path / "rep" / "report.md").read_text("utf-8")


def test_docs_show_the_renderers_output() -> None:
    """docs/settings.md quotes real output of the renderer: keep them equal."""
    from evalita_eval.settings.instruct import setting_task

    text = (ROOT / "docs" / "settings.md").read_text("utf-8")
    doc = _records("te", None, "test")[0]
    for setting in SETTINGS:
        task = setting_task("te", setting)
        assert f"```\n{task.render('p1', doc)} {task.fewshot_answer('p1', doc)}\n```" in text, setting
    at = _records("at", None, "test")[0]
    task = setting_task("at", "ce-ni")
    assert f"```\n{task.render('p2', at)} {task.fewshot_answer('p2', at)}\n```" in text


def test_constrained_needs_a_backend_that_honours_it(tmp_path: Path) -> None:
    from evalita_eval.api import Backend
    from evalita_eval.running.runner import ModelInfo, Runner
    from evalita_eval.run_config import RunSpec
    from evalita_eval.sources.folder import FolderSource

    class Plain(Backend):
        name = "plain"

        @classmethod
        def from_options(cls, options):  # pragma: no cover - never built from options here
            return cls()

    with pytest.raises(ValueError, match="backend .plain. cannot do constrained decoding"):
        Runner(Plain(), ModelInfo("m", None, "float32"), FolderSource(DATA), RunSpec(model="m", data="data", constrained=True), tmp_path)
    Runner(Plain(), ModelInfo("m", None, "float32"), FolderSource(DATA), RunSpec(model="m", data="data"), tmp_path)  # unconstrained: fine


def test_rouge_l_answer_folds_accents() -> None:
    from evalita_eval.metrics import score_samples

    samples = [{"gold_answer": "Sì", "generation": "si"}, {"gold_answer": "Il pancreas", "generation": "pancreas, direi"}]
    # 1.0, then LCS 1 of 2 reference and 2 generated tokens: P = R = 1/2, F = 1/2
    assert score_samples("rougeL_answer", samples) == pytest.approx((1.0 + 0.5) / 2)
