"""lm-eval's own task, group and tag names in `run --tasks` (issue 47, point 10): judged against the names in
lm-eval's installed evalita_llm task files, and through the real CLI on the tiny model."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from evalita_eval.reporting.lm_eval_tasks import from_lm_eval
from evalita_eval.sources.entries import select_entries

from paths import TESTS

DATA = TESTS / "data" / "build"


def lm_eval_names() -> dict[str, set[str]]:
    """Every task, group and tag name that lm-eval's own evalita_llm files declare, by kind."""
    import lm_eval

    folder = Path(lm_eval.__file__).parent / "tasks" / "evalita_llm"
    names: dict[str, set[str]] = {"task": set(), "group": set(), "tag": set()}
    for path in folder.glob("*.yaml"):
        doc = yaml.load(path.read_text("utf-8"), Loader=yaml.BaseLoader)  # !function tags read as plain text
        for kind in names:
            if isinstance(doc.get(kind), str):
                names[kind].add(doc[kind])
    return names


def test_every_name_of_lm_evals_task_files_is_ours_or_refused_as_not_ours() -> None:
    names = lm_eval_names()
    assert (len(names["task"]), len(names["group"])) == (56, 17)
    mapped, refused = {}, set()
    for name in sorted(set().union(*names.values())):
        try:
            tasks, prompts, notes = from_lm_eval([name])
        except ValueError as err:
            assert "NER v2 prompts are not Evalita-LLM's" in str(err)
            refused.add(name)
            continue
        assert notes and notes[0].startswith(f"--tasks: lm-eval's {name} = our ")
        select_entries(tasks)  # every mapped name is one of ours
        mapped[name] = (tasks, prompts)
    # lm-eval's NER v2 prompts (and their per-domain groups) are the only names not ours.
    assert refused == {n for n in set().union(*names.values()) if "ner-v2" in n or n.endswith(("adg_group", "fic_group", "wn_group"))}
    assert len(refused) == 12
    assert mapped["evalita-mp"] == (["te", "sa", "wic", "hs", "at", "faq", "sum", "ls", "ner", "rel"], None)
    assert mapped["evalita-mp_wic_prompt-3"] == (["wic"], ["p3"])
    assert mapped["evalita-mp_ner_group"] == (["ner"], None)
    assert mapped["evalita-mp_ner_tasks_fic"] == (["ner_fic"], None)
    assert mapped["evalita-mp_ner_wn_p2"] == (["ner_wn"], ["p2"])
    assert mapped["evalita-mp_re_prompt-2"] == (["rel"], ["p2"])
    assert mapped["evalita-sp_sum_task_fp-small_p1"] == mapped["evalita-sp_sum_task_fp_p1"] == (["sum"], ["p1"])
    assert mapped["evalita-mp_gen"] == (["sum", "ls", "ner", "rel"], None)


def test_lm_eval_names_asking_different_prompts_of_different_tasks_are_refused() -> None:
    with pytest.raises(ValueError, match="ask different prompts of different tasks"):
        from_lm_eval(["evalita-mp_wic_prompt-1", "evalita-mp_sa_prompt-2"])
    with pytest.raises(ValueError, match="ask different prompts of different tasks"):  # te: every prompt
        from_lm_eval(["evalita-mp_wic_prompt-1", "te"])
    names = ["evalita-mp_wic_prompt-1", "evalita-mp_sa_prompt-3", "evalita-mp_wic_prompt-3", "evalita-mp_sa_prompt-1"]
    assert from_lm_eval(names)[:2] == (["wic", "sa"], ["p1", "p3"])


def test_run_takes_lm_evals_prompt_names_and_says_what_they_are(tiny_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "res"
    proc = subprocess.run([sys.executable, "-m", "evalita_eval.cli", "run", "--model", str(tiny_model), "--data", str(DATA),
                           "--tasks", "evalita-mp_wic_prompt-2,evalita-mp_ner_adg_p2", "--limit", "2", "--max-new-tokens", "4",
                           "--output-dir", str(out)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "--tasks: lm-eval's evalita-mp_wic_prompt-2 = our wic p2" in proc.stderr
    assert "--tasks: lm-eval's evalita-mp_ner_adg_p2 = our ner_adg p2" in proc.stderr
    doc = json.loads((out / "results.json").read_text("utf-8"))
    assert {task: sorted(res) for task, res in doc["results"].items()} == {"wic": ["p2"], "ner_adg": ["p2"]}


def test_run_refuses_lm_evals_ner_v2_in_one_line(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "evalita_eval.cli", "run", "--model", "m", "--data", str(DATA),
                           "--tasks", "evalita-mp_ner-v2_adg_p1"], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 2  # a bad option, as click's own errors: usage, exit 2
    assert proc.stderr.strip().splitlines()[-1:] == ["Error: --tasks: unknown task 'evalita-mp_ner-v2_adg_p1': lm-eval's NER v2 prompts "
                                                "are not Evalita-LLM's; its evalita-mp_ner_group (or ner, ner_adg) asks ours"]
