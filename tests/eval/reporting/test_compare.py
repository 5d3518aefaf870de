"""`evalita-eval compare`: paired tests on the same items, checked against hand-computed cases."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from evalita_eval.reporting import stats
from evalita_eval.cli import main
from evalita_eval.reporting.compare import compare_runs

from paths import TEST_DATA

RESULTS = TEST_DATA / "results"
DATA = TEST_DATA / "build"


def test_mcnemar_exact_by_hand() -> None:
    # b=5, c=1: P(X <= 1) for X ~ Bin(6, 1/2) = (1 + 6) / 64; two-sided: 14 / 64
    assert stats.mcnemar_exact_pvalue(5, 1) == 14 / 64 == stats.mcnemar_exact_pvalue(1, 5)
    assert stats.mcnemar_exact_pvalue(8, 0) == 2 / 256
    assert stats.mcnemar_exact_pvalue(3, 3) == 1.0 and stats.mcnemar_exact_pvalue(0, 0) == 1.0
    with pytest.raises(ValueError):
        stats.mcnemar_exact_pvalue(-1, 2)


def test_paired_bootstrap_by_hand() -> None:
    mean = lambda s: sum(s) / len(s)  # noqa: E731
    # A right on every item, B on none: every resample's difference is 1, so p = 0.
    res = stats.paired_bootstrap([1, 1, 1, 1], [0, 0, 0, 0], mean, k=50, seed=3)
    assert (res.difference, res.p_value, res.ci_low, res.ci_high) == (1.0, 0.0, 1.0, 1.0)
    # Identical systems: no difference, p = 1.
    assert stats.paired_bootstrap([1, 0, 1], [1, 0, 1], mean, k=20, seed=0).p_value == 1.0
    # Seeded: the same numbers twice; the documented draw (default_rng(seed).integers) is what is resampled.
    a, b = [1, 0, 1, 1, 0, 1], [0, 0, 1, 0, 1, 0]
    one, two = (stats.paired_bootstrap(a, b, mean, k=200, seed=7) for _ in range(2))
    assert one == two
    diffs = [mean([a[i] for i in row]) - mean([b[i] for i in row]) for row in stats.bootstrap_indices(6, 200, 7)]
    assert one.p_value == min(1.0, 2 * sum(d <= 0 for d in diffs) / 200)


def test_compare_fixture_runs_hand_computed() -> None:
    """alpha vs beta (tests/data/results): te p1 accuracy has b=15, c=9 discordant items of 60."""
    rows, notes = compare_runs(RESULTS / "alpha", RESULTS / "beta", k=200, seed=0)
    te1 = next(r for r in rows if (r.task, r.prompt) == ("te", "p1"))
    assert (te1.metric, te1.n, te1.test, te1.detail) == ("acc", 60, "mcnemar", "b=15 c=9")
    assert te1.score_a == 0.75 and te1.score_b == 0.65 and te1.difference == pytest.approx(0.10)
    # by hand: 2 * sum_{i<=9} C(24, i) / 2^24 = 2 * 2579130 / 16777216
    assert te1.p_value == 2 * 2579130 / 2 ** 24 == pytest.approx(0.3074562549)
    assert sum(math.comb(24, i) for i in range(10)) == 2579130
    hs = [r for r in rows if r.task == "hs"]
    from evalita_eval.reporting.compare import comparison_table

    p3 = next(r for r in hs if r.prompt == "p3")  # A far better: no resample crosses 0
    assert p3.p_value == 0 and comparison_table([p3], "A", "B").rows[0][8] == "< 0.005"
    assert len(hs) == 7 and all(r.test == "paired bootstrap (k=200, seed 0)" and 0 <= r.p_value <= 1 for r in hs)
    # ner has scores but no samples in the fixtures: not compared, and said so
    assert [r.task for r in rows].count("ner") == 0
    # per task, AvgP: A - B is the mean of the prompts' differences; a paired bootstrap over the same items
    te = [r for r in rows if r.task == "te"]
    assert [r.prompt for r in te] == ["p1", "p2", "p3", "p4", "p5", "p6", "AvgP"]
    assert te[-1].difference == pytest.approx(sum(r.difference for r in te[:-1]) / 6)
    assert te[-1].test == "paired bootstrap (k=200, seed 0)" and 0 <= te[-1].p_value <= 1
    assert te[-1] == compare_runs(RESULTS / "alpha", RESULTS / "beta", k=200, seed=0)[0][6]  # seeded: the same twice
    assert notes == [f"ner {p}: no samples file {RESULTS / 'alpha' / 'samples' / f'ner_{p}.jsonl'}: not compared" for p in ("p1", "p2")]


def _keep_lines(run: Path, task: str, prompt: str, lines: list[str]) -> None:
    """Samples of ``task`` (te: acc) ``prompt`` cut to ``lines``, and results.json's n and acc with them (the reader
    checks they agree)."""
    (run / "samples" / f"{task}_{prompt}.jsonl").write_text("\n".join(lines) + "\n", "utf-8")
    doc = json.loads((run / "results.json").read_text("utf-8"))
    samples = [json.loads(line) for line in lines]
    doc["results"][task][prompt].update(n=len(lines), acc=sum(s["prediction"] == s["gold"] for s in samples) / len(lines))
    (run / "results.json").write_text(json.dumps(doc), "utf-8")


def test_compare_of_runs_with_different_limits_compares_the_common_items(tmp_path: Path) -> None:
    import shutil

    other = tmp_path / "beta"
    shutil.copytree(RESULTS / "beta", other)
    for p in ("p1", "p2", "p3", "p4", "p5", "p6"):  # B as a --limit 40 run of the same data
        lines = (other / "samples" / f"te_{p}.jsonl").read_text("utf-8").splitlines()
        _keep_lines(other, "te", p, lines[:40])
    rows, notes = compare_runs(RESULTS / "alpha", other, k=200, seed=0)
    te = [r for r in rows if r.task == "te"]
    assert [r.n for r in te] == [40] * 7  # six prompts and AvgP, over the 40 items both runs scored
    a = [json.loads(x) for x in (RESULTS / "alpha" / "samples" / "te_p1.jsonl").read_text("utf-8").splitlines()][:40]
    assert te[0].score_a == pytest.approx(sum(s["prediction"] == s["gold"] for s in a) / 40)
    assert ("te p1: compared on the 40 item(s) both runs scored (60 in A, 40 in B: another --limit or data); "
            "the scores in this table are over those items") in notes
    # one prompt on fewer items than the others: that prompt compared, AvgP not (a note says why)
    lines = (other / "samples" / "te_p1.jsonl").read_text("utf-8").splitlines()
    _keep_lines(other, "te", "p1", lines[:39])
    rows, notes = compare_runs(RESULTS / "alpha", other, k=200, seed=0)
    assert [r.prompt for r in rows if r.task == "te"] == ["p1", "p2", "p3", "p4", "p5", "p6"]
    assert "te AvgP: not compared, its prompts were compared on different numbers of items" in notes
    # another gold on a common item: not the same data, refused
    first = json.loads(lines[0])
    _keep_lines(other, "te", "p1", [json.dumps({**first, "gold": 1 - first["gold"]})] + lines[1:39])
    res = CliRunner().invoke(main, ["compare", str(RESULTS / "alpha"), str(other)])
    assert res.exit_code == 1 and "te p1: doc_id 0 has different gold answers" in res.output


def _run(args: list[str]) -> None:
    result = CliRunner().invoke(main, ["run", *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output


def test_compare_two_tiny_model_runs(tiny_model: Path, tmp_path: Path) -> None:
    """Zero-shot vs one-shot on TE: the CLI's differences and p-values equal those computed here from the samples."""
    for name, shots in (("zero", "0"), ("one", "1")):
        _run(["--model", str(tiny_model), "--data", str(DATA), "--tasks", "te,wic", "--num-fewshot", shots,
              "--output-dir", str(tmp_path / name)])
    res = CliRunner().invoke(main, ["compare", str(tmp_path / "zero"), str(tmp_path / "one" / "results.json"),
                                    "--out", str(tmp_path / "cmp"), "--bootstrap", "300"])
    assert res.exit_code == 0, res.output
    payload = json.loads((tmp_path / "cmp" / "compare.json").read_text("utf-8"))
    rows = {(c["task"], c["prompt"]): c for c in payload["comparisons"]}
    assert len(rows) == 14  # 2 tasks x (6 prompts + AvgP)
    for prompt in ("p1", "p2", "p3", "p4", "p5", "p6"):
        a, b = ([json.loads(x) for x in (tmp_path / run / "samples" / f"te_{prompt}.jsonl").read_text("utf-8").splitlines()]
                for run in ("zero", "one"))
        hit_a = [s["prediction"] == s["gold"] for s in a]
        hit_b = [s["prediction"] == s["gold"] for s in b]
        only_a = sum(x and not y for x, y in zip(hit_a, hit_b))
        only_b = sum(y and not x for x, y in zip(hit_a, hit_b))
        n = only_a + only_b
        by_hand = 1.0 if n == 0 else min(1.0, 2 * sum(math.comb(n, i) for i in range(min(only_a, only_b) + 1)) / 2 ** n)
        row = rows[("te", prompt)]
        assert row["detail"] == f"b={only_a} c={only_b}" and row["p_value"] == by_hand
        assert row["difference"] == pytest.approx(sum(hit_a) / len(a) - sum(hit_b) / len(b))
    assert rows[("wic", "p1")]["metric"] == "f1_macro" and rows[("wic", "p1")]["test"] == "paired bootstrap (k=300, seed 0)"
    md = (tmp_path / "cmp" / "compare.md").read_text("utf-8")
    assert "| te | p1 | acc |" in md and "| task | prompt | metric | n | A | B | A − B | test | p | detail |" in md
    # issue 40: compare's AvgP (the prompts and items both runs share) is labelled as such, and explained
    assert "| te | AvgP of shared prompts | acc |" in md and "| te | AvgP |" not in md
    assert ("AvgP of shared prompts: the mean over the prompts both runs scored, on the items both scored; it differs from "
            "a run's own AvgP (`run`, `report`) where the runs' prompts or items differ.") in md


def _with_unparsed(src: Path, dst: Path, counts: dict[str, int]) -> Path:
    """A copy of a fixture run whose te prompts declare ``counts`` unparsed answers."""
    import shutil

    shutil.copytree(src, dst)
    doc = json.loads((dst / "results.json").read_text("utf-8"))
    for prompt, k in counts.items():
        doc["results"]["te"][prompt]["unparsed"] = k
    (dst / "results.json").write_text(json.dumps(doc), "utf-8")
    return dst


def test_compare_does_not_test_a_flagged_prompt(tmp_path: Path) -> None:
    """Issue 28: a prompt with >= 10 % unparsed answers on either side shows its difference, no p-value, and why."""
    a = _with_unparsed(RESULTS / "alpha", tmp_path / "a", {"p1": 6, "p2": 5})  # 6/60 = 10 %: flagged; 5/60: not
    b = _with_unparsed(RESULTS / "beta", tmp_path / "b", {"p3": 59})
    rows, _notes = compare_runs(a, b, k=200, seed=0)
    te = {r.prompt: r for r in rows if r.task == "te"}
    assert te["p1"].test == "not tested" and te["p1"].p_value is None
    assert te["p1"].difference == pytest.approx(0.10)  # the difference is still shown
    assert te["p1"].detail == "p1 has >= 10 % unparsed answers (A (!) 6/60 unparsed): its score rests on the others"
    assert "B (!) 59/60 unparsed" in te["p3"].detail and te["p3"].p_value is None
    assert te["p2"].test == "mcnemar" and te["p2"].p_value is not None  # 5/60 < 10 %: tested
    assert te["AvgP"].p_value is None and te["AvgP"].detail == "p1, p3 have >= 10 % unparsed answers (their rows say where)"
    assert all(r.p_value is not None for r in rows if r.task == "hs")
    res = CliRunner().invoke(main, ["compare", str(a), str(b), "--bootstrap", "200", "--out", str(tmp_path / "cmp")])
    assert res.exit_code == 0, res.output
    p1_line = next(line for line in res.output.splitlines() if line.startswith("| te") and "| p1 " in line)
    assert "not tested" in p1_line and "| – |" in p1_line and "10.00" in p1_line
    saved = json.loads((tmp_path / "cmp" / "compare.json").read_text("utf-8"))
    assert next(c for c in saved["comparisons"] if (c["task"], c["prompt"]) == ("te", "p1"))["p_value"] is None
