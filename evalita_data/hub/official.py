"""``evalita-data push --layout official``: each task as the official Evalita-LLM copy (``evalitahf/*``).

lm-eval's ``evalita_llm`` tasks read ``<org>/<dataset>`` (``word_in_context``, ``faq``,
``entity_recognition``...) with their own split names (``test_1``/``dev_1``,
``reduced_test``/``trial``, ``test_100``): the registry's ``TaskSpec.hub_splits``. This layout
writes the build under those names, so that lm-eval's own task files run on it with only
``dataset_path`` changed::

    README.md                                      card; configs: default (NER: adg, fic, wn)
    eval.yaml                                      the Hub benchmark file (hub/benchmark.py)
    manifest.json                                  the task's entry of the build's manifest
    data/<config>/<split>-00000-of-00001.parquet   one file per split, official names
    jsonl/<config>/<split>.jsonl                   only with --jsonl

Our evaluation split takes the official test name and our few-shot split the official few-shot
name (unless the registry says the official one is another split: ``fewshot_not_ours``); every
other split keeps its name. An official split the build does not have is never stood in for:
it is listed (``MissingSplit``) and the rest is published.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from ..card import DEFAULT_ORG, config_split, ordered_splits, render_card
from ..errors import EvalitaDataError
from ..jsonl import read_jsonl
from ..manifest import BuiltTask, dumps
from ..registry import get_task
from ..taskspec import HubSplits, TaskSpec
from .benchmark import EVAL_YAML, eval_yaml
from .layout import REPO_MANIFEST, RepoFile, TaskRepo
from .parquet import parquet_bytes

LAYOUTS = ("ours", "official")
CARD = "README.md"


@dataclass(frozen=True)
class MissingSplit:
    """An official split that lm-eval's tasks read and that the published repository lacks."""

    repo_id: str
    config: str
    split: str
    why: str

    def line(self) -> str:
        return f"{self.repo_id} [{self.config}]: no split {self.split}: {self.why}"


def hub_splits(spec: TaskSpec) -> HubSplits:
    if spec.hub_splits is None:
        raise EvalitaDataError(f"{spec.id}: the task declares no official layout (TaskSpec.hub_splits); "
                               "publish it with --layout ours")
    return spec.hub_splits


def official_name(spec: TaskSpec, split: str) -> str:
    """Our split name -> its name in the official layout."""
    hub = hub_splits(spec)
    if split == spec.eval_split:
        return hub.test
    if split == spec.fewshot_split and hub.fewshot_not_ours is None:
        return hub.fewshot
    return split


def _renamed(spec: TaskSpec, entry: BuiltTask) -> dict[str, tuple[str, str]]:
    """Our split key -> (config, official split name), in the registry's order (as our card lists
    them); two splits under one name are refused."""
    out: dict[str, tuple[str, str]] = {}
    for key in ordered_splits(spec, entry.splits):
        config, split = config_split(spec, key)
        target = (config, official_name(spec, split))
        clash = [k for k, v in out.items() if v == target]
        if clash:
            raise EvalitaDataError(f"{spec.id}: splits {clash[0]} and {key} would both be {target[0]}/{target[1]} in "
                                   "the official layout")
        out[key] = target
    return out


def _why_absent(spec: TaskSpec, entry: BuiltTask, official: str) -> str:
    hub = hub_splits(spec)
    if official == hub.fewshot and hub.fewshot_not_ours is not None:
        return f"{hub.fewshot_not_ours}; lm-eval's tasks read it as their few-shot split and stop (KeyError) without it"
    ours = spec.eval_split if official == hub.test else spec.fewshot_split
    hints = [m.hint for m in entry.missing_parts() if m.hint and ours in (m.splits or [])]
    named = f"; {EVAL_YAML} names it, as the official benchmark" if official == hub.test else ""
    return f"our {ours} split is not in the build" + (f" ({hints[0]})" if hints else "") + named


def missing_splits(spec: TaskSpec, entry: BuiltTask, repo_id: str,
                   renamed: dict[str, tuple[str, str]]) -> list[MissingSplit]:
    """The official test and few-shot splits of every config that the repository lacks."""
    hub = hub_splits(spec)
    have = set(renamed.values())
    out = []
    for config in spec.configs or [hub.config or "default"]:
        for official in dict.fromkeys((hub.test, hub.fewshot)):
            if (config, official) not in have:
                out.append(MissingSplit(repo_id, config, official, _why_absent(spec, entry, official)))
    return out


def _card(task: str, entry: BuiltTask, org: str, dataset: str, paths: dict[str, str],
          renamed: dict[str, tuple[str, str]], missing: list[MissingSplit]) -> bytes:
    """Our card with the official configs, the repository's name and what was renamed or is missing."""
    spec = get_task(task)
    text = render_card(task, entry, paths, org)
    _, head, body = text.split("---\n", 2)
    meta = yaml.safe_load(head)
    configs: dict[str, list[dict]] = {}
    for key, (config, split) in renamed.items():
        configs.setdefault(config, []).append({"split": split, "path": paths[key]})
    meta["configs"] = [{"config_name": c, "data_files": configs[c]}
                       for c in spec.configs or [hub_splits(spec).config or "default"]
                       if c in configs]
    body = body.replace(f'load_dataset("{org}/{task}"', f'load_dataset("{org}/{dataset}"')
    body += "\n## Official layout\n\nThe layout of the official copy (`evalitahf/" + dataset + "`) that lm-eval's " \
            "`evalita_llm` tasks read; our split names:\n\n| split here | built as |\n|---|---|\n"
    body += "".join(f"| `{c}/{s}` | `{key}` |\n" for key, (c, s) in renamed.items())
    if missing:
        body += "\nNot published (never stood in for by another split):\n\n" + "".join(f"- {m.line()}\n"
                                                                                       for m in missing)
    dumped = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, width=1000)
    return ("---\n" + dumped + "---\n" + body).encode("utf-8")


def official_repo(build: Path, task: str, entry: BuiltTask, org: str = DEFAULT_ORG,
                  jsonl: bool = False) -> tuple[TaskRepo, list[MissingSplit]]:
    """Every file of the task's repository in the official layout, and the official splits it lacks."""
    spec = get_task(task)
    hub = hub_splits(spec)
    repo_id = f"{org}/{hub.dataset}"
    renamed = _renamed(spec, entry)
    paths = {key: f"data/{c}/{s}-00000-of-00001.parquet" for key, (c, s) in renamed.items()}
    missing = missing_splits(spec, entry, repo_id, renamed)
    files = [RepoFile(CARD, _card(task, entry, org, hub.dataset, paths, renamed, missing)),
             RepoFile(REPO_MANIFEST, dumps(entry.published_json(task)).encode("utf-8"))]
    # The benchmark is the official one (every config on the official test split, as lm-eval's tasks read it), also
    # where this build lacks that split: the missing line says so, and a later push with it completes the repository.
    files.append(RepoFile(EVAL_YAML, eval_yaml(task, {c: hub.test for c in spec.configs or [None]})))
    for key, split in entry.splits.items():
        source = build / task / split.file
        files.append(RepoFile(paths[key], parquet_bytes(task, [rec for _, rec in read_jsonl(source)])))
        if jsonl:
            config, name = renamed[key]
            files.append(RepoFile(f"jsonl/{config}/{name}.jsonl", source.read_bytes()))
    return TaskRepo(task, repo_id, tuple(files)), missing
