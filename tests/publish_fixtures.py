"""Fixtures and helpers shared by the publishing tests (cards, --to-dir, push)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evalita_data.jsonl import write_jsonl
from evalita_data.building.pipeline import build
from evalita_data.manifest import MANIFEST_FILE
from evalita_data.building.rawsource import sha256_file
from paths import TEST_DATA
from hub_stub import HubStub

RAW_SAMPLES = TEST_DATA / "raw"


def repo_folder(run: Path, model: str = "org-b__beta-8b@v1", setting: str = "loglikelihood") -> str:
    """The repository folder push-results gives a run: ``<model>/<setting>-<run id>``, the run id hashed from its
    identity (a results.json with none, as the committed beta run, from its record's whole content)."""
    from evalita_eval.record import read_run, run_id

    record = read_run(run, partial=True)
    return f"{model}/{setting}-{run_id(record.identity if record.identity else record.to_json())}"


def published_results(run: Path) -> bytes:
    """The results.json push-results publishes of a run of a Hub model: its record, serialised (format 2)."""
    from evalita_eval.record import read_run
    from evalita_eval.record.read import record_text

    return record_text(read_run(run, partial=True)).encode("utf-8")


def published_samples(run: Path) -> dict[str, bytes]:
    """The samples files push-results publishes of a run of a Hub model: its checked lines (a version-0 line with
    the run id of its record), one JSON object a line."""
    from evalita_eval.record import read_run

    record = read_run(run, partial=True)
    return {record.samples_path(t, p).name: "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines).encode()
            for (t, p), lines in record.samples.items()}
TOKEN = "hf_stubSECRETtoken0123456789"


@pytest.fixture(scope="session")
def sample_build(tmp_path_factory) -> Path:
    """A build of the committed raw samples (every task whose converter exists)."""
    out = tmp_path_factory.mktemp("sample") / "build"
    build(RAW_SAMPLES, out, progress=False)
    return out


def built_tasks(build_dir: Path) -> list[str]:
    return sorted(json.loads((build_dir / MANIFEST_FILE).read_text("utf-8"))["tasks"])


def read_rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines()]


NER_RECORDS = {
    "adg": {
        "train": [{"text": "Mario Rossi vive a Roma.", "entities": [{"entity_text": "Mario Rossi", "type": "PER"}, {"entity_text": "Roma", "type": "LOC"}]},
                  {"text": "Nessuna entità qui.", "entities": []}],
        "dev": [{"text": "La FIAT ha sede a Torino.", "entities": [{"entity_text": "FIAT", "type": "ORG"}, {"entity_text": "Torino", "type": "LOC"}]}],
        "trial": [{"text": "De Gasperi parlò.", "entities": [{"entity_text": "De Gasperi", "type": "PER"}]}],
        "test": [{"text": "Il Senato approvò.", "entities": [{"entity_text": "Senato", "type": "ORG"}]}],
    },
    "fic": {
        "train": [{"text": "Pinocchio corse via.", "entities": [{"entity_text": "Pinocchio", "type": "PER"}]}],
        "test": [{"text": "Geppetto tornò a casa.", "entities": [{"entity_text": "Geppetto", "type": "PER"}]},
                 {"text": "Piove.", "entities": []}],
    },
    "wn": {
        "test": [{"text": "L'ONU a New York.", "entities": [{"entity_text": "ONU", "type": "ORG"}, {"entity_text": "New York", "type": "LOC"}]}],
    },
}


def make_ner_build(out: Path, records: dict = NER_RECORDS) -> Path:
    """A hand-made build folder with NER's per-domain layout (ner/<domain>/<split>.jsonl)."""
    splits = {}
    for domain, by_split in records.items():
        for split, rows in by_split.items():
            path = out / "ner" / domain / f"{split}.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            write_jsonl(path, rows)
            key = f"{domain}/{split}"
            splits[key] = {"rows": len(rows), "sha256": sha256_file(path), "file": f"{key}.jsonl"}
    entry = {
        "tool": "evalita-data", "tool_version": "0.1.0", "seed": 0,
        "inputs": {"ADG_train.tsv": {"bytes": 10, "sha256": "0" * 64}},
        "splits": splits,
        "report": {"dropped": {"sentence without tokens": 2}, "repaired": {}, "examples": {}, "missing": [], "notes": {}},
    }
    manifest = {"format": 1, "tasks": {"ner": entry}, "not_built": {}}
    (out / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", "utf-8")
    return out


@pytest.fixture(scope="module")
def hub():
    stub = HubStub().start()
    try:
        yield stub
    finally:
        stub.stop()


def hub_env(hub: HubStub, home: Path, token: str | None = TOKEN) -> dict:
    """Environment of a client process that talks only to the stub."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_", "HUGGING_FACE_", "TRANSFORMERS_"))}
    env.update(HF_ENDPOINT=hub.url, HF_HUB_DISABLE_XET="1", HF_HOME=str(home), HF_HUB_DISABLE_TELEMETRY="1",
               HF_HUB_DISABLE_PROGRESS_BARS="1", HF_DATASETS_DISABLE_PROGRESS_BARS="1", NO_PROXY="127.0.0.1")
    if token is not None:
        env["HF_TOKEN"] = token
    return env


def run_cli(args: list[str], env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evalita_data.cli", *args], env=env, capture_output=True, text=True)


def shrink_split(build_dir: Path, task: str, key: str) -> None:
    """Drop the last record of one split and update the manifest as a rebuild would."""
    manifest_path = build_dir / MANIFEST_FILE
    manifest = json.loads(manifest_path.read_text("utf-8"))
    split = manifest["tasks"][task]["splits"][key]
    path = build_dir / task / split["file"]
    rows = read_rows(path)[:-1]
    write_jsonl(path, rows)
    split.update(rows=len(rows), sha256=sha256_file(path))
    manifest_path.write_text(json.dumps(manifest, ensure_ascii=False, indent=2, sort_keys=True) + "\n", "utf-8")
