"""The official Evalita-LLM layout (``evalitahf/*``) served by the Hub stub.

Each task's repository as lm-eval's ``evalita_llm`` tasks read it: the dataset name,
configs and split names of ``TaskSpec.hub_splits`` (``test_all``, ``test_1``/``dev_1``,
``reduced_test``/``trial``, ``test_100``...), one Parquet file per split. The records are
those of a build of the committed raw samples (``tests/data/raw``), renamed to the
official splits (a missing gold split is stood in for by another split of the task).
"""

from __future__ import annotations

from pathlib import Path

import yaml

from evalita_data.jsonl import read_jsonl
from evalita_data.hub.parquet import parquet_bytes
from evalita_data.registry import get_task, tasks as registered_tasks
from hub_stub import GITATTRIBUTES, HubStub, Repo, StoredFile

ORG = "evalitahf"
STAND_INS = ("dev", "train", "trial", "test")


def build_records(build: Path, task: str, config: str | None, split: str) -> list[dict] | None:
    path = build / task / (f"{config}/" if config else "") / f"{split}.jsonl"
    return [rec for _, rec in read_jsonl(path)] if path.is_file() else None


def official_files(build: Path, task: str, edit=None) -> dict[str, StoredFile]:
    """README.md (configs) and data/<config>/<split>-00000-of-00001.parquet of one task.

    ``edit(config, official_split, records)`` may change the records before they are
    written (to serve a copy that breaks our schema).
    """
    spec = get_task(task)
    hub = spec.hub_splits
    assert hub is not None
    ours = {hub.test: spec.eval_split, hub.fewshot: spec.fewshot_split}
    configs = spec.configs or [hub.config or "default"]
    files: dict[str, StoredFile] = {".gitattributes": StoredFile(GITATTRIBUTES, False)}
    card_configs = []
    for config in configs:
        data_files = []
        for official, split in ours.items():
            # The sample build lacks a few gold splits (HS test_all, REL test: not public):
            # another split of the same task stands in, schema-valid all the same.
            for candidate in (split, *STAND_INS):
                records = build_records(build, task, config if spec.configs else None, candidate)
                if records is not None:
                    break
            assert records is not None, f"{task}: no split in {build}"
            if edit is not None:
                records = edit(config, official, records)
            path = f"data/{config}/{official}-00000-of-00001.parquet"
            files[path] = StoredFile(parquet_bytes(task, records), True)
            data_files.append({"split": official, "path": path})
        card_configs.append({"config_name": config, "data_files": data_files})
    card = "---\n" + yaml.safe_dump({"configs": card_configs}, sort_keys=False) + "---\n# " + spec.title + "\n"
    files["README.md"] = StoredFile(card.encode("utf-8"), False)
    return files


def official_task_ids() -> list[str]:
    """The registered tasks that declare an official copy (TaskSpec.hub_splits)."""
    return [t for t, spec in registered_tasks().items() if spec.hub_splits is not None]


def serve_official(stub: HubStub, build: Path, tasks: list[str] | None = None, org: str = ORG, edit=None) -> dict[str, str]:
    """Put the official repository of ``tasks`` (default: every task that has one) into the stub; returns repo id -> commit sha."""
    shas = {}
    for task in tasks if tasks is not None else official_task_ids():
        repo_id = f"{org}/{get_task(task).hub_splits.dataset}"
        repo = Repo(repo_id, private=False)
        shas[repo_id] = repo.commit("main", f"official layout of {task}", official_files(build, task, edit)).sha
        with stub.state.lock:
            stub.state.repos[repo_id] = repo
    return shas
