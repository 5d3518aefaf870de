"""Issue 28: a prompt with 10 % or more unparsed answers is flagged wherever its score is shown."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from evalita_eval.reporting.unparsed_flag import flag_notes, flag_text, flagged_prompts, is_flagged, unparsed_share

from paths import TEST_DATA

RESULTS = TEST_DATA / "results"


def test_flag_rule_at_the_boundary() -> None:
    assert is_flagged({"unparsed": 1, "n": 10}) and flag_text({"unparsed": 1, "n": 10}) == "(!) 1/10 unparsed"  # 10 %: flagged
    assert not is_flagged({"unparsed": 9, "n": 91}) and flag_text({"unparsed": 9, "n": 91}) == ""  # 9.89 %
    assert unparsed_share({"unparsed": 6, "n": 8}) == 0.75 and is_flagged({"unparsed": 8, "n": 8})
    # no count, or one that is not a number (an untrusted results.json): no share, no flag
    for scores in ({"acc": 0.5, "n": 8}, {"unparsed": "6", "n": 8}, {"unparsed": 1, "n": 0}, {"unparsed": True, "n": 8},
                   {"unparsed": float("nan"), "n": 8}):
        assert unparsed_share(scores) is None and not is_flagged(scores)


def test_flagged_prompts_of_results_json() -> None:
    results = {"sa": {"p1": {"acc": 0.0, "unparsed": 6, "n": 8}, "p2": {"acc": 0.1, "unparsed": 0, "n": 8}},
               "te": {"p1": {"acc": 0.7, "n": 60}}}
    assert flagged_prompts(results) == {"sa": {"p1": {"unparsed": 6, "n": 8, "share": 0.75}}}
    assert flag_notes("sa", results["sa"], "M") == [
        "M: sa p1 (!) 6/8 unparsed: 10 % or more of its answers could not be read (scored as wrong); the score rests on the others"]


def test_console_summary_marks_the_flagged_prompt() -> None:
    from evalita_eval.running.console import summary_table

    lines = summary_table({"sa": {"p1": {"acc": 0.25, "unparsed": 1, "n": 10}, "p2": {"acc": 0.5, "unparsed": 0, "n": 10}}}).splitlines()
    assert lines[1].endswith("acc=25.00  unparsed=1/10 (!)") and lines[1].split()[:2] == ["sa", "p1"]
    assert lines[2].endswith("acc=50.00  unparsed=0/10")
    assert lines[3] == "(!): 10 % or more of the prompt's answers could not be read (unparsed, scored as wrong); the score rests on the others"
    assert len(lines) == 4 and "(!)" not in summary_table({"sa": {"p1": {"acc": 0.5, "unparsed": 0, "n": 10}}})


def test_push_results_card_marks_the_flagged_prompt(tmp_path: Path) -> None:
    from evalita_eval.publishing.push_results import render_card
    from evalita_eval.record import read_run

    run = tmp_path / "alpha"
    shutil.copytree(RESULTS / "alpha", run)
    doc = json.loads((run / "results.json").read_text("utf-8"))
    doc["results"]["te"]["p2"]["unparsed"], doc["results"]["te"]["p3"]["unparsed"] = 6, 5  # 10 % and 8.3 % of 60
    (run / "results.json").write_text(json.dumps(doc), "utf-8")
    card = render_card(read_run(run / "results.json", partial=True), "alpha/loglikelihood", "me/results")
    te_row = next(line for line in card.splitlines() if line.startswith("| te "))
    assert "| p1 75.00, p2 70.00 (!), p3 81.67, p4 83.33," in te_row and te_row.endswith("| p2 6 / 60 (!), p3 5 / 60 |")
    assert "Note: te p2 (!) 6/60 unparsed: 10 % or more of its answers could not be read" in card
    assert "Note: te p3" not in card and "(!): 10 % or more of the prompt's answers could not be read" in card


# Issue 40: a prompt none of whose answers was read says so beside its score everywhere, and the
# summaries that average it say how many such prompts they include.
NONE_READ_RESULTS = {"ner_fic": {"p1": {"ner_f1": 0.25, "unparsed": 0, "n": 2}, "p2": {"ner_f1": 0.5, "unparsed": 2, "n": 2}}}


def test_console_says_no_answer_read() -> None:
    from evalita_eval.running.console import summary_table, task_summary_table

    lines = summary_table(NONE_READ_RESULTS).splitlines()
    assert lines[2] == "ner_fic  p2      2  ner_f1=50.00 (!) no answer read (2/2 unparsed)"
    assert lines[4] == ("no answer read: none of its answers could be read in the task's answer format; the score is "
                        "lm-eval's rule for such answers (a choice task: each a wrong choice; a generative task: each scored "
                        "as generated, read as empty where nothing fits, right on an item whose gold is empty), not a measure "
                        "of answers read")
    assert "rests on no answer" not in "\n".join(lines)  # never beside a score of 50.00
    task_line = task_summary_table(NONE_READ_RESULTS).splitlines()[1]
    assert task_line.endswith("not a measurement: fewer than 30 items; includes 1 prompt with no answer read (p2)")
    assert "no answer read" not in task_summary_table({"ner_fic": {"p1": NONE_READ_RESULTS["ner_fic"]["p1"]}})


def _alpha_with_te_p2_unread(tmp_path: Path) -> Path:
    run = tmp_path / "alpha"
    shutil.copytree(RESULTS / "alpha", run)
    doc = json.loads((run / "results.json").read_text("utf-8"))
    doc["results"]["te"]["p2"]["unparsed"] = 60  # of 60: no answer read
    (run / "results.json").write_text(json.dumps(doc), "utf-8")
    return run


def test_report_and_card_say_no_answer_read(tmp_path: Path) -> None:
    from evalita_eval.publishing.push_results import render_card
    from evalita_eval.reporting.report import write_report
    from evalita_eval.record import read_run

    run = _alpha_with_te_p2_unread(tmp_path)
    write_report([run / "results.json"], tmp_path / "report", k=0)
    md = (tmp_path / "report" / "report.md").read_text("utf-8")
    assert "| p2 | 70.00 no answer read (60/60 unparsed) |" in md
    assert "> note: alpha-7b: the Summary's averages include 1 prompt with no answer read (te p2)" in md
    assert ("> note: alpha-7b: te p2 (!) no answer read (60/60 unparsed): none of its answers could be read in the task's "
            "answer format; the score is lm-eval's rule for such answers (a choice task: each a wrong choice;") in md
    assert "rests on no answer" not in md
    html = (tmp_path / "report" / "report.html").read_text("utf-8")
    assert "70.00 no answer read (60/60 unparsed)</td>" in html

    card = render_card(read_run(run / "results.json", partial=True), "alpha/loglikelihood", "me/results")
    assert "p2 70.00 (!) no answer read (60/60 unparsed)," in card
    assert "Note: te: its MinP, MaxP, AvgP, CPS and Sharpe include 1 prompt with no answer read (p2)" in card


def test_compare_does_not_test_a_prompt_with_no_answer_read() -> None:
    from evalita_eval.reporting.unparsed_flag import untested_avgp_reason, untested_reason

    unread, fine = {"acc": 0.7, "unparsed": 60, "n": 60}, {"acc": 0.7, "unparsed": 0, "n": 60}
    assert untested_reason("p2", unread, fine) == (
        "p2 has >= 10 % unparsed answers (A (!) no answer read (60/60 unparsed)): a score of unread answers alone is not tested")
    assert untested_avgp_reason(["p2"], ["p2"]) == (
        "p2 has >= 10 % unparsed answers (their rows say where); the AvgP includes 1 prompt with no answer read (p2)")


def test_report_cli_says_what_a_score_of_unread_answers_is(tmp_path: Path) -> None:
    """Issue 47: a prompt none of whose answers was read shows lm-eval's score (70.00), marked, and the text beside it
    says what that number is; never that it "rests on no answer read"."""
    import subprocess
    import sys

    run = _alpha_with_te_p2_unread(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "evalita_eval.cli", "report", str(run), "--out", str(tmp_path / "report"),
                           "--bootstrap", "0", "--no-progress"], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    md = (tmp_path / "report" / "report.md").read_text("utf-8")
    assert "| p2 | 70.00 no answer read (60/60 unparsed) |" in md
    assert ("te p2 (!) no answer read (60/60 unparsed): none of its answers could be read in the task's answer format; "
            "the score is lm-eval's rule for such answers") in md
    html = (tmp_path / "report" / "report.html").read_text("utf-8")
    assert "rests on no answer" not in md + html
