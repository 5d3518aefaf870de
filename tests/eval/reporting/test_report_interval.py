"""The report leads with the point score and the percentile interval of its resamples; EuroEval's mean ± 1.96·SE
only under its own name; every task table says n, and fewer than MIN_ITEMS items is 'not a measurement'."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from evalita_eval.reporting import stats
from evalita_eval.reporting.report import write_report

HITS = {"p1": [1, 1, 1, 1, 1], "p2": [1, 0, 1, 0, 1]}  # te accuracy 100 % and 60 % on the same 5 items


def accuracy(samples: list[dict], task: str | None = None) -> float:
    return sum(s["prediction"] == s["gold"] for s in samples) / len(samples)


def _run(folder: Path) -> Path:
    (folder / "samples").mkdir(parents=True)
    for prompt, hits in HITS.items():
        lines = [json.dumps({"doc_id": i, "gold": 1, "prediction": int(h)}) for i, h in enumerate(hits)]
        (folder / "samples" / f"te_{prompt}.jsonl").write_text("\n".join(lines) + "\n", "utf-8")
    doc = {"status": "complete", "model": {"name_or_path": "org/m", "revision": None, "dtype": "float32"},
           "config": {"limit": 5, "num_fewshot": 0, "setting": "loglikelihood"}, "comparable_with_paper": False,
           "not_comparable_with_paper": ["--limit 5: only the first 5 items of each task"],
           "results": {"te": {p: {"acc": accuracy([{"prediction": h, "gold": 1} for h in hits]), "n": 5} for p, hits in HITS.items()}}}
    (folder / "results.json").write_text(json.dumps(doc), "utf-8")
    return folder / "results.json"


def test_point_score_and_percentile_interval_lead_euroeval_apart(tmp_path: Path) -> None:
    k, seed = 50, 3
    write_report([_run(tmp_path / "run")], tmp_path / "rep", k=k, seed=seed, score_samples=lambda _m, s, task=None: accuracy(s))
    md = (tmp_path / "rep" / "report.md").read_text("utf-8")
    html = (tmp_path / "rep" / "report.html").read_text("utf-8")
    # the resampled accuracies of p2, by the documented draw (numpy default_rng(seed), k x n item indices)
    idx = stats.bootstrap_indices(5, k, seed)
    p2 = 100 * np.array([np.mean([HITS["p2"][i] for i in row]) for row in idx])
    avg = (100 + p2) / 2  # p1 is right on every item: each resample's AvgP is (100 + p2) / 2
    lo, hi = np.percentile(p2, 2.5), np.percentile(p2, 97.5)
    alo, ahi = np.percentile(avg, 2.5), np.percentile(avg, 97.5)
    assert lo < 60 < hi  # a real interval around the point score
    interval = ["| prompt | m (n=5) |", "| p1 | 100.00 [100.00–100.00] |", f"| p2 | 60.00 [{lo:.2f}–{hi:.2f}] |",
                f"| AvgP | 80.00 [{alo:.2f}–{ahi:.2f}] |"]
    text = "\n".join(interval[:1] + ["| --- | ---: |"] + interval[1:])
    assert text in md, md
    half = 1.96 * p2.std(ddof=1) / np.sqrt(k)
    euroeval = f"| p2 | {p2.mean():.2f} ± {half:.2f} |"
    assert euroeval in md
    # the ± appears only in EuroEval's table, after its name
    before, after = md.split("EuroEval's interval, for comparison with EuroEval only", 1)
    assert "±" not in before.split("## te")[1] and euroeval in after
    assert "> note: m: n=5, not a measurement: fewer than 30 items" in md
    # HTML: the same cells, the interval table first
    assert html.index(f"<td>60.00 [{lo:.2f}–{hi:.2f}]</td>") < html.index("EuroEval&#39;s interval") < html.index(
        f"<td>{p2.mean():.2f} ± {half:.2f}</td>")
    assert "<th>m (n=5)</th>" in html and "m: n=5, not a measurement: fewer than 30 items" in html
    data = json.loads((tmp_path / "rep" / "report.json").read_text("utf-8"))
    assert data["tasks"]["te"]["bootstrap"]["m/p2"]["point"] == 60.0
