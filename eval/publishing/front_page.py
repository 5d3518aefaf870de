"""The results repository's front page (its root ``README.md``): every run pushed there, read back from its
``results.json`` at every push, and the dataset viewer's YAML header (docs/push-results.md)."""

from __future__ import annotations

import re
from typing import Mapping

from ..record.model import RunRecord
from ..reporting.facts import setting_label
from ..reporting.tables import Markdown, TextTable
from .model_page import model_page_refusal, yaml_str
from .public import model_label


def run_row(folder: str, run: RunRecord | str) -> list[str]:
    """One line of the front page; a results.json that cannot be read (``run``: why) says so in the status."""
    # A link only to a folder of naming.run_folder's path-safe characters (a peer's repository may hold any other).
    safe = re.fullmatch(r"[\w.@-]+/[\w.@-]+", folder, re.ASCII)
    link = Markdown(f"[`{folder}/`]({folder}/README.md)") if safe else folder
    if isinstance(run, str):
        return [link, "?", "?", "?", "?", run, "?"]
    config = run.config
    refusal = model_page_refusal(run)
    return [link, model_label(run.model), f"{setting_label(config)}, {config.num_fewshot or 0}-shot",
            config.split or "official", "all" if config.limit is None else str(config.limit),
            f"{run.status_text}, {len(run.results)} task(s)",
            "yes (.eval_results, model-index.yaml)" if refusal is None else f"no: {refusal}"]


def render_front_page(repo_id: str, runs: Mapping[str, RunRecord | str]) -> str:
    """The root README.md of a results repository holding ``runs`` (folder -> its published record, or why it
    cannot be read)."""
    folders = sorted(runs)
    lines = ["---", "pretty_name: Evalita-LLM results", "tags:", "- evalita-llm", "- evaluation", "configs:"]
    for f in folders:
        lines += [f"- config_name: {yaml_str(f.replace('/', '--'))}", f"  data_files: {yaml_str(f + '/results.json')}"]
    lines += [
        "---", "# Evalita-LLM results", "",
        f"Runs of `evalita-eval run` pushed to `{repo_id}` by `evalita-eval push-results`, one folder per model and "
        "setting and run (`<model>/<setting>-<run id>`, the run's default local folder: a second run of the same model "
        "and setting is listed beside the first, never replaces it): `results.json` (scores, settings, data hashes), "
        "`samples/` (every prediction) and the run's card "
        "`README.md` with its per-task tables. Model page: whether the run's scores may be copied to the model's "
        "page (`.eval_results/*.yaml`, `model-index.yaml`): only complete runs of every item of the official splits.",
        "",
        TextTable(["run", "model", "setting", "split", "limit", "status", "model page"],
                  [run_row(f, runs[f]) for f in folders], text_cols=7).markdown(),
    ]
    return "\n".join(lines).rstrip() + "\n"
